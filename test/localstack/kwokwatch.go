package localstack

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/regosched/regosched/internal/redis/redisroles"
	"github.com/regosched/regosched/test/fixture"
)

// evictionReason is the reason of the DisruptionTarget condition the API
// server puts on a pod it deletes for the Eviction API.
const evictionReason = "EvictionByEvictionAPI"

// podSeen is what loopWatch saw of one pod incarnation, each moment the
// first time seen (zero: never).
type podSeen struct {
	name string
	// created, bound, running, evicted (its DisruptionTarget condition
	// of the Eviction API), deleting (its deletion started) and gone.
	created, bound, running, evicted, deleting, gone time.Time
	node, ip                                         string
	// boundRole is its roleOf when it was first seen bound.
	boundRole string
}

// loopWatch records, from watches of one namespace's pods and
// PodDisruptionBudgets, what a poll could miss: kwok completes a deletion
// at once, so an evicted pod's last states last milliseconds.
type loopWatch struct {
	mu   sync.Mutex
	pods map[types.UID]*podSeen
	// disrupted is when a PodDisruptionBudget's status first listed each
	// pod in disruptedPods, which the Eviction API writes when the budget
	// lets an eviction through.
	disrupted map[string]time.Time
}

// watchLoop starts recording the pods and budgets of ns until ctx ends.
func watchLoop(ctx context.Context, client kubernetes.Interface, ns string) (*loopWatch, error) {
	w := &loopWatch{pods: map[types.UID]*podSeen{}, disrupted: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.pod,
		UpdateFunc: func(_, obj any) { w.pod(obj) },
		DeleteFunc: w.podGone,
	}); err != nil {
		return nil, fmt.Errorf("watching pods of %s: %w", ns, err)
	}
	pdbs := factory.Policy().V1().PodDisruptionBudgets().Informer()
	if _, err := pdbs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.budget,
		UpdateFunc: func(_, obj any) { w.budget(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching PodDisruptionBudgets of %s: %w", ns, err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watching %s: %v not synced: %w", ns, typ, context.Cause(ctx))
		}
	}
	return w, nil
}

// seen returns the record of p, made on first sight; w.mu is held.
func (w *loopWatch) seen(p *corev1.Pod, now time.Time) *podSeen {
	s, ok := w.pods[p.UID]
	if !ok {
		s = &podSeen{name: p.Name, created: now}
		w.pods[p.UID] = s
	}
	return s
}

func (w *loopWatch) pod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen(p, now)
	if p.Spec.NodeName != "" && s.bound.IsZero() {
		s.bound, s.node = now, p.Spec.NodeName
		s.boundRole = roleOf(p)
	}
	if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && s.running.IsZero() {
		s.running, s.ip = now, p.Status.PodIP
	}
	if p.DeletionTimestamp != nil && s.deleting.IsZero() {
		s.deleting = now
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == evictionReason && s.evicted.IsZero() {
			s.evicted = now
		}
	}
}

func (w *loopWatch) podGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.pod(p) // its last state may hold what no update showed
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.seen(p, time.Now()); s.gone.IsZero() {
		s.gone = time.Now()
	}
}

func (w *loopWatch) budget(obj any) {
	b, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for name := range b.Status.DisruptedPods {
		if _, ok := w.disrupted[name]; !ok {
			w.disrupted[name] = now
		}
	}
}

// incarnations returns a copy of the records of pod name's incarnations.
func (w *loopWatch) incarnations(name string) map[types.UID]podSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[types.UID]podSeen{}
	for uid, s := range w.pods {
		if s.name == name {
			out[uid] = *s
		}
	}
	return out
}

// disruptedAt is when a budget first listed pod name as disrupted.
func (w *loopWatch) disruptedAt(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.disrupted[name]
	return t, ok
}

// roleOf is p's role labels and where they come from, e.g.
// "replica/slot-0 (redis)"; "/ ()" when it has none.
func roleOf(p *corev1.Pod) string {
	return p.Labels[fixture.LabelRole] + "/" + p.Labels[fixture.LabelShard] + " (" + p.Annotations[redisroles.SourceAnnotation] + ")"
}
