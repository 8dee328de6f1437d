package placement

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/test/fixture"
)

func TestCacheNodes(t *testing.T) {
	for _, feed := range feeds {
		t.Run(feed.name, func(t *testing.T) { testCacheNodes(t, feed.start) })
	}
}

func testCacheNodes(t *testing.T, start startFunc) {
	c, client := start(t, byInstance, nil,
		fixture.MakeNode().Name("node-1").Hostname().Zone("a").Obj(),
		fixture.MakeNode().Name("node-2").Obj())

	tests := []struct {
		node       string
		wantLabels map[string]string
		wantOK     bool
	}{
		{"node-1", map[string]string{"topology.kubernetes.io/zone": "a", "kubernetes.io/hostname": "node-1"}, true},
		{"node-2", nil, true},
		{"node-3", nil, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			labels, ok := c.NodeLabels(tt.node)
			if ok != tt.wantOK {
				t.Errorf("NodeLabels(%q) known = %v, want %v", tt.node, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.wantLabels, labels); diff != "" {
				t.Errorf("NodeLabels(%q) mismatch (-want +got):\n%s", tt.node, diff)
			}
		})
	}
	if got, want := c.NodeCount(), 2; got != want {
		t.Errorf("NodeCount() = %d, want %d", got, want)
	}

	ctx := context.Background()
	if _, err := client.CoreV1().Nodes().Create(ctx, fixture.MakeNode().Name("node-3").Zone("b").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-3 known", func() bool { _, ok := c.NodeLabels("node-3"); return ok })
	if got, want := c.NodeCount(), 3; got != want {
		t.Errorf("NodeCount() after create = %d, want %d", got, want)
	}
	labels, _ := c.NodeLabels("node-3")
	if diff := cmp.Diff(map[string]string{"topology.kubernetes.io/zone": "b"}, labels); diff != "" {
		t.Errorf("NodeLabels(node-3) mismatch (-want +got):\n%s", diff)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-1 forgotten", func() bool { _, ok := c.NodeLabels("node-1"); return !ok })
	if got, want := c.NodeCount(), 2; got != want {
		t.Errorf("NodeCount() after delete = %d, want %d", got, want)
	}
}
