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

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// A bound pod's new labels are told of once indexed; a new pod, a status
// change and a move of a pending pod are not relabels.
func TestCacheOnRelabel(t *testing.T) {
	ctx := context.Background()
	c, client, calls := relabelCache(t)
	pods := client.CoreV1().Pods("shop")
	p := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "replica", "").Node("node-1").Obj()
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
	p.Labels = fixture.RedisLabels("cache", "master", "")
	p.ResourceVersion = "3"
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	if got := calls.Load(); got != 1 {
		t.Errorf("onRelabel called %d times after one relabel, want 1", got)
	}
}

// relabelCache starts a synced cache grouping by instance over an empty
// fake clientset, counting its onRelabel calls.
func relabelCache(t *testing.T) (*Cache, *fake.Clientset, *atomic.Int32) {
	t.Helper()
	log, _ := logtest.NewNullLogger()
	client := fake.NewClientset()
	calls := &atomic.Int32{}
	c, err := New(client, byInstance, log, WithOnRelabel(func() { calls.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.Start(runCtx)
	t.Cleanup(func() { cancel(); c.Shutdown() })
	syncCtx, stop := context.WithTimeout(runCtx, 30*time.Second)
	defer stop()
	if !c.WaitForSync(syncCtx) {
		t.Fatal("cache did not sync")
	}
	return c, client, calls
}

// Labels no rule reads do not call onRelabel: the topology labels the API
// server copies onto a pod at binding (Kubernetes 1.33+) made every
// binding start a whole audit pass, hundreds a second in a burst.
func TestCacheOnRelabelOnlyWhenTheDescriptionChanges(t *testing.T) {
	tests := []struct {
		name      string
		assumed   bool              // bound through Assume first, as the bind verb does
		pending   bool              // the informer saw it unbound first
		add       map[string]string // labels the update adds
		component string            // the component label after the update
		want      int32
	}{
		{name: "binding adds the node's zone", assumed: true, pending: true,
			add: map[string]string{"topology.kubernetes.io/zone": "zone-a"}, component: "replica"},
		{name: "a label no rule reads", add: map[string]string{"team": "storage"}, component: "replica"},
		{name: "a role moved", component: "master", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c, client, calls := relabelCache(t)
			pods := client.CoreV1().Pods("shop")
			p := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "replica", "").Obj()
			if !tt.pending {
				p.Spec.NodeName = "node-1"
			}
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			flush(t, c, client)
			after := p.DeepCopy()
			after.Spec.NodeName = "node-1"
			if tt.assumed {
				placed := model.PodFromObject(after)
				keys, described, _ := byInstance(ctx, placed)
				placed.Claims = described
				c.Assume(placed, keys, nil)
			}
			for k, v := range tt.add {
				after.Labels[k] = v
			}
			after.Labels[componentLabel] = tt.component
			after.ResourceVersion = "2"
			if _, err := pods.Update(ctx, after, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			flush(t, c, client)
			if got := calls.Load(); got != tt.want {
				t.Errorf("onRelabel called %d times, want %d", got, tt.want)
			}
		})
	}
}
