package placement

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A bound pod's new labels are told of once indexed; a new pod, a status
// change and a move of a pending pod are not relabels.
func TestCacheOnRelabel(t *testing.T) {
	ctx := context.Background()
	log, _ := logtest.NewNullLogger()
	client := fake.NewClientset()
	var calls atomic.Int32
	c, err := New(client, byInstance, log, WithOnRelabel(func() { calls.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	c.Start(runCtx)
	t.Cleanup(func() { cancel(); c.Shutdown() })
	syncCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if !c.WaitForSync(syncCtx) {
		t.Fatal("cache did not sync")
	}
	pods := client.CoreV1().Pods("shop")
	p := newPod("shop", "cache-0", redis("cache", "replica"), onNode("node-1"))
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	p.ResourceVersion = "2"
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	if got := calls.Load(); got != 0 {
		t.Fatalf("onRelabel called %d times before any relabel, want 0", got)
	}
	p.Labels = redis("cache", "master")
	p.ResourceVersion = "3"
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	if got := calls.Load(); got != 1 {
		t.Errorf("onRelabel called %d times after one relabel, want 1", got)
	}
}
