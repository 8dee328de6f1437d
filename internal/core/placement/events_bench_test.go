package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkPodEvents is the cost of pod events in the cache's handler, two
// updates an op (there and back), on a cache holding 10,000 pods: a bound
// pod seen with new labels (the policy describes it again), status churn
// of a bound pod (nothing a policy reads changed), and of a pending one,
// which only a shared informer (kube-scheduler's) delivers. With its own
// informers the handler is given stripped records; with shared ones, full
// pods.
func BenchmarkPodEvents(b *testing.B) {
	const n = 10000
	before := benchPod(0, "ns-0", "inst-0")
	relabelled := before.DeepCopy()
	relabelled.ResourceVersion += "1"
	relabelled.Labels[componentLabel] = "master"
	churned := before.DeepCopy()
	churned.ResourceVersion += "1"
	churned.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pendingBefore := benchPod(n, "ns-0", "inst-0")
	pendingBefore.Spec.NodeName = ""
	pendingBefore.Status.Phase = corev1.PodPending
	pendingChurned := pendingBefore.DeepCopy()
	pendingChurned.ResourceVersion += "1"
	pendingChurned.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	strip := func(p *corev1.Pod) any {
		r, _ := stripPod(p)
		return r
	}
	feeds := []struct {
		name    string
		handler func(*Cache) cache.ResourceEventHandler
		object  func(*corev1.Pod) any
	}{
		{"own", func(c *Cache) cache.ResourceEventHandler { return c.writer().handlers() }, strip},
		{"shared", (*Cache).selectingWriter, func(p *corev1.Pod) any { return p }},
	}
	for _, feed := range feeds {
		for _, ev := range []struct {
			name     string
			old, new *corev1.Pod
		}{
			{"relabel", before, relabelled},
			{"status", before, churned},
			{"pending", pendingBefore, pendingChurned},
		} {
			b.Run(fmt.Sprintf("informer=%s/event=%s", feed.name, ev.name), func(b *testing.B) {
				c := newIdleCache(b, byInstance)
				fill(b, c, n)
				h := feed.handler(c)
				oldObj, newObj := feed.object(ev.old), feed.object(ev.new)
				b.ReportAllocs()
				for b.Loop() {
					h.OnUpdate(oldObj, newObj)
					h.OnUpdate(newObj, oldObj)
				}
			})
		}
	}
}
