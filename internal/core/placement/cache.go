// Package placement keeps a live, indexed view of where the pods that policies
// care about are running, and of the labels of every node.
//
// It is fed by client-go shared informers: its own (New), or kube-scheduler's
// when regosched runs inside it (NewFromInformers). Pods are stripped to the
// few fields a placement policy reads (model.Pod), and grouped under the keys
// a KeyFunc (the policy's peer_keys rule) gives them, so that finding the
// peers of a pending pod costs the same whatever the number of unrelated pods
// in the cluster.
package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/regosched/regosched/internal/core/model"
)

// KeyFunc returns the groups a pod belongs to. Two pods are peers when they
// share a group. A pod with no group is of no interest to any policy and is
// not indexed. claims are kept with the pod (Pod.Claims):
// what the policy worked out once per pod version instead of per request.
type KeyFunc func(ctx context.Context, pod *model.Pod) (keys []string, c *model.Claims, err error)

// boundPods selects the pods that occupy a node: bound and not finished. A pod
// leaving this selection (it succeeded or failed) arrives as a delete event.
// kube-scheduler's own pod informer uses the same phase selector.
const boundPods = "spec.nodeName!=,status.phase!=" + string(corev1.PodSucceeded) +
	",status.phase!=" + string(corev1.PodFailed)

// Cache is the live placement view. Create it with New, then call Start;
// or, inside kube-scheduler, with NewFromInformers.
type Cache struct {
	log       logrus.FieldLogger
	factories []informers.SharedInformerFactory
	pods      cache.SharedIndexInformer
	nodes     cache.SharedIndexInformer
	// statefulSets, if set, gives the replicas of StatefulSets (Replicas);
	// statefulSetsForbidden once the API server refused to list them.
	statefulSets          cache.SharedIndexInformer
	statefulSetsForbidden atomic.Bool
	synced                []cache.InformerSynced
	keyFunc               atomic.Pointer[KeyFunc]
	clock                 clock.WithTicker
	// onRelabel, if set, is told when a bound pod's description changes.
	onRelabel func()
	domains   domainCounts

	// writeMu serialises writers (informer events, binds and the end of a
	// re-index), so that a re-index never overwrites a newer event with an
	// older object.
	writeMu sync.Mutex
	// dirty, while a re-index builds its index beside this one, collects
	// the names written meanwhile (guarded by writeMu; nil otherwise).
	dirty map[string]struct{}
	// reindexMu lets one re-index run at a time.
	reindexMu sync.Mutex
	// mu guards the index (written with writeMu held too) and the
	// in-flight maps below.
	mu sync.RWMutex
	index
	// inflight holds pods that passed filter and are not yet seen bound,
	// also indexed by group key so that a waiter looks at its peers only;
	// landed is closed (and replaced) whenever a grouped one lands.
	inflight      map[types.UID]*inflight
	inflightByKey map[string]map[types.UID]*inflight
	sweepAt       int
	landed        chan struct{}
}

// Option configures a Cache.
type Option func(*Cache)

// WithOnRelabel has f called (on the informer's goroutine: it must not
// block) once the index holds new labels of a bound pod it held before and
// the policy describes the pod differently under them (other groups or
// claims): a role moved by a failover, say, which may break a rule where it
// stands. Labels no rule reads, such as the topology labels the API server
// copies onto a pod when it is bound, do not call f.
func WithOnRelabel(f func()) Option {
	return func(cache *Cache) { cache.onRelabel = f }
}

// WithClock replaces the real clock, for tests of in-flight expiry.
func WithClock(c clock.WithTicker) Option {
	return func(cache *Cache) { cache.clock = c }
}

// New builds a cache over the cluster that client talks to, with informers
// of its own that Start runs. keys tells which pods matter and how they
// group; SetKeyFunc replaces it later.
func New(client kubernetes.Interface, keys KeyFunc, log logrus.FieldLogger, opts ...Option) (*Cache, error) {
	// Pending and finished pods should never reach this process: the field
	// selector filters them on the API server. upsertLocked does not rely
	// on it (a fake API server ignores field selectors).
	podFactory, pods := podRecordInformer(client, boundPods, stripPod)
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripNode))
	setFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripStatefulSet))
	sets := setFactory.Apps().V1().StatefulSets().Informer()
	c := newCache(keys, log, append([]Option{WithStatefulSets(sets)}, opts...))
	if err := sets.SetWatchErrorHandlerWithContext(c.statefulSetsError); err != nil {
		return nil, fmt.Errorf("watching StatefulSets: %w", err)
	}
	c.factories = []informers.SharedInformerFactory{podFactory, nodeFactory, setFactory}
	if err := c.feed(pods, nodeFactory.Core().V1().Nodes().Informer(), c.writer().handlers()); err != nil {
		return nil, err
	}
	return c, nil
}

// NewFromInformers builds a cache fed by informers that another component
// owns, starts and stops: kube-scheduler's shared informer factory when
// regosched runs inside it as a framework plugin, so that the cluster's
// pods and nodes are listed and watched once, by the scheduler. pods must
// hold *corev1.Pod and nodes *corev1.Node objects, as a factory's
// Core().V1().Pods() and Core().V1().Nodes() informers do; ask the factory
// for them before it is started. keys is as for New.
//
// The cache registers an event handler on pods and nothing else: it never
// lists or watches, and its Start and Shutdown do nothing. HasSynced and
// WaitForSync wait until that handler has indexed every pod of the pod
// informer's initial list and the node informer has its initial list.
//
// pods may hold every pod, pending and finished ones included: the cache
// indexes the pods that New's field selector selects (bound and not
// finished), a pod that becomes bound arriving as added and one that
// finishes as deleted; a pending pod's deletion ends its flight (Reserve).
// The informers' objects are shared with their owner and are only read.
func NewFromInformers(pods, nodes cache.SharedIndexInformer, keys KeyFunc, log logrus.FieldLogger, opts ...Option) (*Cache, error) {
	if pods == nil || nodes == nil {
		return nil, errors.New("placement cache: a pod and a node informer are both needed")
	}
	c := newCache(keys, log, opts)
	if err := c.feed(pods, nodes, c.selectingWriter()); err != nil {
		return nil, err
	}
	return c, nil
}

// newCache is a cache with no informers yet.
func newCache(keys KeyFunc, log logrus.FieldLogger, opts []Option) *Cache {
	c := &Cache{
		log:           log,
		clock:         clock.RealClock{},
		index:         newIndex(),
		inflight:      map[types.UID]*inflight{},
		inflightByKey: map[string]map[types.UID]*inflight{},
		sweepAt:       minSweep,
		landed:        make(chan struct{}),
	}
	for _, o := range opts {
		o(c)
	}
	c.keyFunc.Store(&keys)
	return c
}

// feed has the cache read pods and nodes, with events from pods through
// handler. The cache reads the node informer's store alone, whose
// HasSynced then tells that it is complete: a handler on nodes would only
// be woken by every node's status updates.
func (c *Cache) feed(pods, nodes cache.SharedIndexInformer, handler cache.ResourceEventHandler) error {
	// Set before the handler may run: a started informer calls it at once.
	c.pods, c.nodes = pods, nodes
	reg, err := pods.AddEventHandler(handler)
	if err != nil {
		return fmt.Errorf("registering pod event handler: %w", err)
	}
	// StatefulSets are waited for too: a quorum judged before they are
	// listed would take a group's size from its members alone.
	c.synced = []cache.InformerSynced{reg.HasSynced, nodes.HasSynced}
	if c.statefulSets != nil {
		c.synced = append(c.synced, c.statefulSetsSynced)
	}
	return nil
}

// Start runs the cache's own informers (New's) until ctx ends. It does not
// wait for them to sync. A cache from NewFromInformers has none: their
// owner runs the informers it reads.
func (c *Cache) Start(ctx context.Context) {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
}

// Shutdown waits for the cache's own informers' goroutines once ctx given
// to Start ended.
func (c *Cache) Shutdown() {
	for _, f := range c.factories {
		f.Shutdown()
	}
}

// HasSynced reports whether both informers have delivered their initial lists
// and every initial pod has been indexed.
func (c *Cache) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until HasSynced or ctx ends; it reports which.
func (c *Cache) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), c.synced...)
}
