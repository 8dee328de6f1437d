package placement

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/regosched/regosched/internal/core/model"
)

// podRecord is what the pod informer stores: the fields placement decisions
// read, and the identity and resource version the informer itself needs (an
// update whose resource version is unchanged counts as a resync, which a
// handler without a resync period never sees). A corev1.Pod, even stripped,
// carries large empty PodSpec and PodStatus structs and a full ObjectMeta,
// which a cache of every pod in a large cluster would pay for each.
type podRecord struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
	labels          model.Labels
	nodeName        string
	statefulSet     string
	priority        int32
	// terminal: the pod succeeded or failed (the field selector keeps such
	// pods out, but an update may still carry the phase before the delete).
	terminal bool
	// otherScheduler: the pod is for another scheduler than the one a
	// Pending serves (set by stripPodFor only; it fits in padding).
	otherScheduler bool
}

var (
	_ runtime.Object            = (*podRecord)(nil)
	_ metav1.ObjectMetaAccessor = (*podRecord)(nil)
)

// GetObjectKind is part of runtime.Object; records are never serialised.
func (r *podRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object. Every field is immutable, so a
// shallow copy is a deep one.
func (r *podRecord) DeepCopyObject() runtime.Object {
	out := *r
	return &out
}

// GetObjectMeta gives the informer (meta.Accessor) the record's identity and
// resource version. It builds an ObjectMeta on each call, a short-lived
// allocation per informer event (whose decoding costs far more), rather than
// keeping one in every record.
func (r *podRecord) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{
		Namespace:       r.namespace,
		Name:            r.name,
		UID:             r.uid,
		ResourceVersion: r.resourceVersion,
	}
}

func (r *podRecord) pod() *model.Pod {
	return &model.Pod{
		Namespace:   r.namespace,
		Name:        r.name,
		UID:         r.uid,
		Labels:      r.labels,
		Priority:    r.priority,
		Node:        r.nodeName,
		StatefulSet: r.statefulSet,
	}
}

// samePlacement: nothing a policy reads differs between a and b.
func samePlacement(a, b *podRecord) bool {
	return a.uid == b.uid && a.nodeName == b.nodeName && a.terminal == b.terminal &&
		a.otherScheduler == b.otherScheduler && a.priority == b.priority && a.labels == b.labels &&
		a.statefulSet == b.statefulSet
}

// stripPod is the informer transform for pods: it keeps only what placement
// decisions read, so that a large cluster's pods cost little memory. It runs
// before an object enters the informer's store.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		// Tombstones (cache.DeletedFinalStateUnknown) and other values pass unchanged.
		return obj, nil
	}
	return newPodRecord(p), nil
}

// newPodRecord is the record of p: the one conversion of a pod to what the
// cache keeps, for the cache's own informers (stripPod) and for a foreign
// informer's full pods alike (recordOf). It only reads p.
func newPodRecord(p *corev1.Pod) *podRecord {
	var prio int32
	if p.Spec.Priority != nil {
		prio = *p.Spec.Priority
	}
	return &podRecord{
		// Namespaces and node names repeat across pods; each decoded pod
		// brings its own copy, which the canonical one replaces.
		namespace:       unique.Make(p.Namespace).Value(),
		name:            p.Name,
		uid:             p.UID,
		resourceVersion: p.ResourceVersion,
		labels:          model.NewLabels(p.Labels),
		nodeName:        unique.Make(p.Spec.NodeName).Value(),
		statefulSet:     unique.Make(model.StatefulSetOf(p)).Value(),
		priority:        prio,
		terminal:        finished(p),
	}
}

// finished: p succeeded or failed; it occupies no node any more.
func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// occupiesNode is the boundPods field selector as a filter on a foreign
// informer's full pods: bound and not finished.
func occupiesNode(obj any) bool {
	p, ok := obj.(*corev1.Pod)
	return ok && p.Spec.NodeName != "" && !finished(p)
}

// stripPodFor is stripPod for the pending pods of scheduler: it also
// notes whether a pod is for another scheduler, so that Pending does not
// trust its field selector for that.
func stripPodFor(scheduler string) cache.TransformFunc {
	return func(obj any) (any, error) {
		out, err := stripPod(obj)
		if p, ok := obj.(*corev1.Pod); ok {
			if r, ok := out.(*podRecord); ok {
				r.otherScheduler = p.Spec.SchedulerName != scheduler
			}
		}
		return out, err
	}
}

// stripNode is the informer transform for nodes: policies read node labels only.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:            n.Name,
			UID:             n.UID,
			ResourceVersion: n.ResourceVersion,
			Labels:          n.Labels,
		},
	}, nil
}
