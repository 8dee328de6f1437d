package placement

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/regosched/regosched/internal/core/model"
)

// DescribeFunc describes a pending pod for its filter call: its groups and
// claims, and by, the policy that described it, so that a description made
// under another can be told apart.
type DescribeFunc func(ctx context.Context, pod *model.Pod) (keys []string, c *model.Claims, by *model.Origin, err error)

// Pending describes the pods waiting for one scheduler profile as soon as
// the API server reports them, so that a filter call finds its pod's
// description made: the policy then runs on the informer's goroutine while
// the pod waits in kube-scheduler's queue, not inside the scheduler's one
// scheduling cycle at a time. A pod the scheduler reaches before its event
// reaches regosched is described by the filter call itself, as is a pod
// whose labels changed since, or one described under another policy.
type Pending struct {
	log      logrus.FieldLogger
	factory  informers.SharedInformerFactory
	pods     cache.SharedIndexInformer
	synced   cache.InformerSynced
	describe atomic.Pointer[DescribeFunc]

	// writeMu serialises writers (informer events and re-describing), so
	// that re-describing never overwrites a newer event with an older one.
	writeMu sync.Mutex
	mu      sync.RWMutex
	byUID   map[types.UID]*described
}

type described struct {
	pod  *model.Pod // with the claims, as DescribeFunc gave them
	keys []string
	by   *model.Origin
}

// pendingPods selects the pods scheduler has yet to place. A pod leaving
// this selection (bound, or moved to a terminal phase) arrives as a delete.
func pendingPods(scheduler string) string {
	return "spec.nodeName=,spec.schedulerName=" + scheduler +
		",status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)
}

// NewPending watches the pending pods of the profile scheduler (its
// schedulerName) and describes each with describe; SetDescribeFunc
// replaces it later.
func NewPending(client kubernetes.Interface, scheduler string, describe DescribeFunc, log logrus.FieldLogger) (*Pending, error) {
	p := &Pending{log: log, byUID: map[types.UID]*described{}}
	p.describe.Store(&describe)
	p.factory, p.pods = podRecordInformer(client, pendingPods(scheduler), stripPodFor(scheduler))
	reg, err := p.pods.AddEventHandler(p.writer().handlers())
	if err != nil {
		return nil, fmt.Errorf("registering pending pod event handler: %w", err)
	}
	p.synced = reg.HasSynced
	return p, nil
}

// Start runs the informer until ctx ends.
func (p *Pending) Start(ctx context.Context) { p.factory.Start(ctx.Done()) }

// Shutdown waits for the informer's goroutines once ctx given to Start ended.
func (p *Pending) Shutdown() { p.factory.Shutdown() }

// WaitForSync blocks until the pods pending at start are described, or ctx
// ends; it reports which.
func (p *Pending) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), p.synced)
}

// Described returns what was worked out for pod, when it was described
// under by and nothing the description read has changed since: the same
// pod (UID), namespace, name, labels and priority.
func (p *Pending) Described(pod *model.Pod, by *model.Origin) (keys []string, c *model.Claims, ok bool) {
	p.mu.RLock()
	d := p.byUID[pod.UID]
	p.mu.RUnlock()
	if d == nil || d.by != by || d.pod.Namespace != pod.Namespace || d.pod.Name != pod.Name ||
		d.pod.Labels != pod.Labels || d.pod.Priority != pod.Priority {
		return nil, nil, false
	}
	return d.keys, d.pod.Claims, true
}

// Is reports whether pod is a pending pod of the profile as last reported:
// the same UID, namespace, name, labels and priority.
func (p *Pending) Is(pod *model.Pod) bool {
	p.mu.RLock()
	d := p.byUID[pod.UID]
	p.mu.RUnlock()
	return d != nil && d.pod.Namespace == pod.Namespace && d.pod.Name == pod.Name &&
		d.pod.Labels == pod.Labels && d.pod.Priority == pod.Priority
}

// RegisterMetrics exposes the number of pending pods described on reg.
func (p *Pending) RegisterMetrics(reg prometheus.Registerer) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "regosched_pending_pods",
		Help: "Pods waiting for the regosched profile whose description is made, ahead of their filter calls.",
	}, func() float64 { return float64(p.Len()) })
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("registering pending pod metrics: %w", err)
	}
	return nil
}

// Len is the number of pending pods described.
func (p *Pending) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.byUID)
}

// SetDescribeFunc replaces the description (after a policy change) and
// describes every pending pod again with it before returning.
func (p *Pending) SetDescribeFunc(ctx context.Context, describe DescribeFunc) {
	p.writer().rewrite(ctx, p.pods.GetStore(), func() { p.describe.Store(&describe) })
}

// writer routes the informer's events to the descriptions.
func (p *Pending) writer() recordWriter {
	return recordWriter{mu: &p.writeMu, upsert: p.upsertLocked, remove: p.removeLocked}
}

// removeLocked forgets r. The caller holds writeMu.
func (p *Pending) removeLocked(r *podRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byUID, r.uid)
}

// upsertLocked describes r. The caller holds writeMu.
func (p *Pending) upsertLocked(ctx context.Context, r *podRecord) {
	if r.nodeName != "" || r.terminal || r.otherScheduler {
		// No longer pending, or never the profile's: the field selector
		// should keep the latter out, but a fake API server ignores it.
		p.removeLocked(r)
		return
	}
	pod := r.pod()
	d := &described{pod: pod}
	var err error
	// pod is not shared yet: setting Claims keeps it immutable once published.
	d.keys, pod.Claims, d.by, err = (*p.describe.Load())(ctx, pod)
	if err != nil {
		// Nothing is lost: the filter call describes the pod itself, and
		// reports the error where the scheduler sees it.
		p.log.WithError(err).WithField("pod", pod.Key()).Debug("describing a pending pod")
		p.removeLocked(r)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byUID[r.uid] = d
}
