package placement

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
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
	synced    []cache.InformerSynced
	keyFunc   atomic.Pointer[KeyFunc]
	clock     clock.WithTicker
	// onRelabel, if set, is told when a bound pod's description changes.
	onRelabel func()

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

type entry struct {
	pod  *model.Pod
	keys []string
}

// index groups the indexed pods for peer look-ups.
type index struct {
	byName map[string]*entry                // namespace/name -> entry
	byUID  map[types.UID]string             // uid -> namespace/name
	groups map[string]map[string]*model.Pod // group key -> namespace/name -> pod
	// assumed holds the pods recorded by the bind verb and not yet seen
	// bound by the informer, by name (a re-index may have copied the
	// indexed pod). Apart from entry, which every cached pod has, because
	// only a few pods are ever assumed at once.
	assumed map[string]*assumption
}

// assumption is a pod recorded by the bind verb, as given to Assume, with
// the other incarnations of its name (UIDs) that the cache or its informer
// held then: older ones, whose late events must not replace it.
type assumption struct {
	origin *model.Pod
	older  []types.UID
}

func newIndex() index {
	return index{byName: map[string]*entry{}, byUID: map[types.UID]string{}, groups: map[string]map[string]*model.Pod{},
		assumed: map[string]*assumption{}}
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
	c := newCache(keys, log, opts)
	c.factories = []informers.SharedInformerFactory{podFactory, nodeFactory}
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
	c.synced = []cache.InformerSynced{reg.HasSynced, nodes.HasSynced}
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

// writer routes the pod informer's events to the index.
func (c *Cache) writer() recordWriter {
	return recordWriter{mu: &c.writeMu, upsert: c.upsertLocked, remove: c.removeLocked}
}

// selectingWriter is writer for a pod informer of full pods that lists
// more pods than boundPods selects. Adds and updates pass as a watch with
// that selector would see them: of the pods it selects only, a pod that
// becomes bound being added and one that finishes deleted. Every delete
// passes: a pod deleted before it was seen bound ends its flight (and
// leaves the index if the bind verb assumed it), which New's informers do
// not see; the index holds no other unbound pod.
func (c *Cache) selectingWriter() cache.ResourceEventHandler {
	return everyDelete{cache.FilteringResourceEventHandler{FilterFunc: occupiesNode, Handler: c.writer().handlers()}}
}

// everyDelete is a FilteringResourceEventHandler whose filter applies to
// adds and updates only.
type everyDelete struct {
	cache.FilteringResourceEventHandler
}

func (h everyDelete) OnDelete(obj any) { h.Handler.OnDelete(obj) }

// Peers returns the cached pods that share at least one of keys, except the
// pod whose UID is self, sorted by namespace and name. The cost depends on
// the number of peers only.
func (c *Cache) Peers(keys []string, self types.UID) []*model.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []*model.Pod
	for i, k := range keys {
		for _, p := range c.groups[k] {
			if p.UID == self {
				continue
			}
			// A pod in several of the keys is returned once.
			if i > 0 && inAnyGroup(c.groups, keys[:i], p) {
				continue
			}
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *model.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

func inAnyGroup(groups map[string]map[string]*model.Pod, keys []string, p *model.Pod) bool {
	name := p.Key()
	for _, k := range keys {
		if _, ok := groups[k][name]; ok {
			return true
		}
	}
	return false
}

// NodeLabels returns the labels of a node, and whether the node is known.
// The map is the node informer's own, shared with its owner: it is not to
// be modified.
func (c *Cache) NodeLabels(name string) (map[string]string, bool) {
	obj, ok, err := c.nodes.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, false
	}
	return n.Labels, true
}

// PodCount is the number of indexed pods (bound pods that belong to a group).
func (c *Cache) PodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byName)
}

// NodeCount is the number of known nodes.
func (c *Cache) NodeCount() int {
	return len(c.nodes.GetIndexer().ListKeys())
}

// RegisterMetrics exposes the cache's size on reg.
func (c *Cache) RegisterMetrics(reg prometheus.Registerer) error {
	for _, g := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "regosched_cached_pods",
			Help: "Bound pods that belong to a policy group and are indexed for peer look-ups.",
		}, func() float64 { return float64(c.PodCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "regosched_cached_nodes",
			Help: "Nodes known to the placement cache.",
		}, func() float64 { return float64(c.NodeCount()) }),
	} {
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("registering placement metrics: %w", err)
		}
	}
	return nil
}

// removeLocked drops p from the index. The caller holds writeMu.
func (c *Cache) removeLocked(p *podRecord) {
	c.markDirtyLocked(model.PodKey(p.namespace, p.name))
	c.mu.Lock()
	defer c.mu.Unlock()
	// A late delete of an earlier incarnation (same name, another UID) must
	// not take out the one indexed now, e.g. assumed by the bind verb.
	name := model.PodKey(p.namespace, p.name)
	if e, ok := c.byName[name]; ok && e.pod.UID == p.uid {
		c.remove(name)
	}
	// A pod deleted in flight will never land: stop waiting for it.
	c.landedLocked(p.uid)
}

// upsertLocked (re)indexes p. The caller holds writeMu.
func (c *Cache) upsertLocked(ctx context.Context, obj *podRecord) {
	name := model.PodKey(obj.namespace, obj.name)
	c.markDirtyLocked(name)
	if obj.nodeName == "" {
		// Not bound: nothing this index holds, whatever the field selector
		// let through; an unbound view of an assumed pod must not take it out.
		return
	}
	if a := c.assumed[name]; a != nil && !c.supersedes(a, obj) {
		return // a late event of an older incarnation: the assumed pod stands
	}
	pod, keys := c.describeRecord(ctx, *c.keyFunc.Load(), obj)
	c.mu.Lock()
	old := c.byName[name]
	c.remove(name)
	// Seen bound: whatever was in flight has landed.
	c.landedLocked(pod.UID)
	c.add(name, pod, keys, nil)
	c.mu.Unlock()
	if c.onRelabel != nil && old != nil && old.pod.UID == pod.UID && old.pod.Labels != pod.Labels &&
		(!slices.Equal(old.keys, keys) || !old.pod.Claims.Same(pod.Claims)) {
		c.onRelabel()
	}
}

// describeRecord is the pod of a record with its groups and claims under
// keys; a pod that is not bound, or that the policy cannot describe, has no
// group.
func (c *Cache) describeRecord(ctx context.Context, keys KeyFunc, obj *podRecord) (*model.Pod, []string) {
	pod := obj.pod()
	if obj.nodeName == "" || obj.terminal {
		return pod, nil
	}
	// pod is not shared yet: setting Claims keeps Pod values immutable once
	// published.
	groups, described, err := keys(ctx, pod)
	if err != nil {
		// The pod is kept out of the index: the policy cannot say which
		// rules concern it. Logged loudly because it weakens decisions.
		c.log.WithError(err).WithField("pod", pod.Key()).Error("computing peer keys; pod not indexed")
		return pod, nil
	}
	pod.Claims = described
	return pod, groups
}

// supersedes reports whether the informer's record r of an assumed pod's
// name replaces the pod the bind verb recorded: r is that pod seen bound
// (or finished), or a newer incarnation. An unbound view does not, nor does
// a late event of an incarnation the cache held when the pod was assumed,
// or of one the informer's store no longer holds (the events that
// followed are on their way).
func (c *Cache) supersedes(a *assumption, r *podRecord) bool {
	switch {
	case r.nodeName == "":
		return false
	case r.uid == a.origin.UID:
		return true
	case slices.Contains(a.older, r.uid):
		return false
	}
	cur, ok := c.storedRecord(model.PodKey(r.namespace, r.name))
	return ok && cur.uid == r.uid
}

// storedRecord is the record of what the pod informer's store holds under
// name.
func (c *Cache) storedRecord(name string) (*podRecord, bool) {
	obj, ok, err := c.pods.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return recordOf(obj)
}

// add puts a pod in its groups; a pod without groups is left out.
// a, when set, is the bind verb's record: the pod is assumed.
func (ix *index) add(name string, pod *model.Pod, keys []string, a *assumption) {
	if len(keys) == 0 {
		return
	}
	if a != nil {
		ix.assumed[name] = a
	}
	ix.byName[name] = &entry{pod: pod, keys: keys}
	ix.byUID[pod.UID] = name
	for _, k := range keys {
		g := ix.groups[k]
		if g == nil {
			g = map[string]*model.Pod{}
			ix.groups[k] = g
		}
		g[name] = pod
	}
}

// PodByUID returns an indexed (bound or assumed) pod.
func (c *Cache) PodByUID(uid types.UID) (*model.Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.byName[c.byUID[uid]]
	if !ok {
		return nil, false
	}
	return e.pod, true
}

// remove takes a pod out of every group.
func (ix *index) remove(name string) {
	e, ok := ix.byName[name]
	if !ok {
		return
	}
	delete(ix.byName, name)
	delete(ix.assumed, name)
	delete(ix.byUID, e.pod.UID)
	for _, k := range e.keys {
		delete(ix.groups[k], name)
		if len(ix.groups[k]) == 0 {
			delete(ix.groups, k)
		}
	}
}
