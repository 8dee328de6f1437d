package placement

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/test/fixture"
)

func TestCacheNodeNames(t *testing.T) {
	c, client := startCache(t,
		byInstance,
		nil,
		fixture.MakeNode().Name("node-2").Obj(),
		fixture.MakeNode().Name("node-10").Obj(),
		fixture.MakeNode().Name("node-1").Obj(),
	)
	if diff := cmp.Diff([]string{"node-1", "node-10", "node-2"}, c.NodeNames()); diff != "" {
		t.Errorf("NodeNames() mismatch (-want +got):\n%s", diff)
	}
	if err := client.CoreV1().Nodes().Delete(context.Background(), "node-10", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-10 forgotten", func() bool { return len(c.NodeNames()) == 2 })
	if diff := cmp.Diff([]string{"node-1", "node-2"}, c.NodeNames()); diff != "" {
		t.Errorf("NodeNames() after delete mismatch (-want +got):\n%s", diff)
	}
}
