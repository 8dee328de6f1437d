package placement

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// A delete of a pod's old incarnation that arrives after its new one was
// indexed (assumed by the bind verb, or seen) leaves the new one indexed;
// a delete of the incarnation indexed removes it.
func TestLateDeleteOfOldIncarnation(t *testing.T) {
	tests := []struct {
		name      string
		deleteUID types.UID
		want      []string
	}{
		{"old incarnation", "uid-old", []string{"shop/cache-0"}},
		{"the indexed one", "uid-new", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := startCache(t, byInstance, nil)
			key := []string{"shop/cache"}
			c.Assume(fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-new").Redis("cache", "replica", "").Node("node-2").Model(), key, nil)
			w := c.writer()
			w.mu.Lock()
			w.remove(&podRecord{namespace: "shop", name: "cache-0", uid: tt.deleteUID, nodeName: "node-1"})
			w.mu.Unlock()
			got := names(c.Peers(key, ""))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Peers() after the delete mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// placed is what a test compares of an indexed pod: which incarnation, and where.
type placed struct {
	UID  types.UID
	Node string
}

func placements(pods []*model.Pod) []placed {
	out := make([]placed, 0, len(pods))
	for _, p := range pods {
		out = append(out, placed{p.UID, p.Node})
	}
	return out
}

// TestAssumedPodAgainstTheInformer follows a pod assumed by the bind verb
// (uid-new on node-2) through what the pod informer reports afterwards, on
// a fake API server, which ignores field selectors as a real one does not:
// an unbound view of the pod and late updates of its old incarnation
// (uid-old, still on node-1 in the informer) must not take it out, nor
// must the old incarnation's delete that follows; the pod seen bound, or a
// newer incarnation seen bound, replaces it.
func TestAssumedPodAgainstTheInformer(t *testing.T) {
	key := []string{"shop/cache"}
	labels := fixture.RedisLabels("cache", "replica", "")
	old := fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-old").Labels(labels).Node("node-1").Obj()
	pending := fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-new").Labels(labels).Phase(corev1.PodPending).Obj()
	assumed := placed{"uid-new", "node-2"}

	type step struct {
		name string
		// do changes the fake API server; the informer's events follow.
		do   func(t *testing.T, ctx context.Context, pods corev1client.PodInterface)
		want []placed
	}
	update := func(p *corev1.Pod, change func(*corev1.Pod)) func(*testing.T, context.Context, corev1client.PodInterface) {
		return func(t *testing.T, ctx context.Context, pods corev1client.PodInterface) {
			p = p.DeepCopy()
			change(p)
			if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	create := func(p *corev1.Pod) func(*testing.T, context.Context, corev1client.PodInterface) {
		return func(t *testing.T, ctx context.Context, pods corev1client.PodInterface) {
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(t *testing.T, ctx context.Context, pods corev1client.PodInterface) {
		if err := pods.Delete(ctx, "cache-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	terminating := func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Labels = map[string]string{nameLabel: "redis", instanceLabel: "cache", componentLabel: "master"}
	}
	tests := []struct {
		name string
		// initial is in the API server, and indexed, before the bind verb assumes uid-new.
		initial []*corev1.Pod
		steps   []step
	}{
		{
			name: "the pending pod reported after the bind verb assumed it",
			steps: []step{
				{"unbound view", create(pending), []placed{assumed}},
				{"seen bound elsewhere", update(pending, func(p *corev1.Pod) { p.Spec.NodeName = "node-3" }), []placed{{"uid-new", "node-3"}}},
			},
		},
		{
			name:    "late update, then delete, of the old incarnation",
			initial: []*corev1.Pod{old},
			steps: []step{
				{"late update of uid-old", update(old, terminating), []placed{assumed}},
				{"delete of uid-old", remove, []placed{assumed}},
				{"uid-new pending", create(pending), []placed{assumed}},
				{"uid-new seen bound", update(pending, func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }), []placed{assumed}},
			},
		},
		{
			name:    "delete of the old incarnation, then a newer incarnation bound",
			initial: []*corev1.Pod{old},
			steps: []step{
				{"delete of uid-old", remove, []placed{assumed}},
				{"uid-newer bound", create(fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-newer").Labels(labels).Node("node-4").Obj()),
					[]placed{{"uid-newer", "node-4"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := make([]kruntime.Object, 0, len(tt.initial))
			for _, p := range tt.initial {
				objs = append(objs, p)
			}
			c, client := startCache(t, byInstance, nil, objs...)
			ctx := context.Background()
			pods := client.CoreV1().Pods("shop")
			c.Assume(fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-new").Labels(labels).Node("node-2").Model(), key, nil)
			if diff := cmp.Diff([]placed{assumed}, placements(c.Peers(key, ""))); diff != "" {
				t.Fatalf("after Assume, Peers() (-want +got):\n%s", diff)
			}
			for _, s := range tt.steps {
				s.do(t, ctx, pods)
				flush(t, c, client)
				if diff := cmp.Diff(s.want, placements(c.Peers(key, ""))); diff != "" {
					t.Errorf("after %s, Peers() (-want +got):\n%s", s.name, diff)
				}
			}
		})
	}
}

// TestStaleEventOfAnotherIncarnation: an event of an incarnation the
// informer's store no longer holds (its delete is on its way) leaves the
// assumed pod indexed, whatever its kind; the assumed pod's own bound view
// replaces it.
func TestStaleEventOfAnotherIncarnation(t *testing.T) {
	key := []string{"shop/cache"}
	tests := []struct {
		name   string
		record podRecord
		want   []placed
	}{
		{"another incarnation, bound", podRecord{uid: "uid-old", nodeName: "node-1"}, []placed{{"uid-new", "node-2"}}},
		{"another incarnation, finished", podRecord{uid: "uid-old", nodeName: "node-1", terminal: true}, []placed{{"uid-new", "node-2"}}},
		{"the assumed pod, unbound", podRecord{uid: "uid-new"}, []placed{{"uid-new", "node-2"}}},
		{"the assumed pod, bound", podRecord{uid: "uid-new", nodeName: "node-3"}, []placed{{"uid-new", "node-3"}}},
		{"the assumed pod, finished", podRecord{uid: "uid-new", nodeName: "node-2", terminal: true}, []placed{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := startCache(t, byInstance, nil)
			labels := model.NewLabels(fixture.RedisLabels("cache", "replica", ""))
			c.Assume(&model.Pod{Namespace: "shop", Name: "cache-0", UID: "uid-new", Labels: labels, Node: "node-2"}, key, nil)
			r := tt.record
			r.namespace, r.name, r.labels = "shop", "cache-0", labels
			w := c.writer()
			w.mu.Lock()
			w.upsert(context.Background(), &r)
			w.mu.Unlock()
			if diff := cmp.Diff(tt.want, placements(c.Peers(key, ""))); diff != "" {
				t.Errorf("Peers() after the event (-want +got):\n%s", diff)
			}
		})
	}
}
