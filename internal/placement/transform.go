package placement

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// podRecord is what the pod informer stores: the object metadata the
// informer needs (keys, resource versions) plus the three fields placement
// decisions read. A corev1.Pod, even stripped, carries about 1 KB of empty
// PodSpec and PodStatus structs; at 100,000 pods that is what matters.
type podRecord struct {
	metav1.ObjectMeta
	NodeName string
	Priority *int32
	Phase    corev1.PodPhase
}

var _ runtime.Object = (*podRecord)(nil)

// GetObjectKind is part of runtime.Object; records are never serialised.
func (r *podRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object.
func (r *podRecord) DeepCopyObject() runtime.Object {
	out := &podRecord{NodeName: r.NodeName, Phase: r.Phase}
	r.DeepCopyInto(&out.ObjectMeta)
	if r.Priority != nil {
		p := *r.Priority
		out.Priority = &p
	}
	return out
}

func (r *podRecord) terminal() bool {
	return r.Phase == corev1.PodSucceeded || r.Phase == corev1.PodFailed
}

func (r *podRecord) pod() *Pod {
	var prio int32
	if r.Priority != nil {
		prio = *r.Priority
	}
	return &Pod{
		Namespace: r.Namespace,
		Name:      r.Name,
		UID:       r.UID,
		Labels:    r.Labels,
		Priority:  prio,
		Node:      r.NodeName,
		Phase:     r.Phase,
	}
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
	return &podRecord{
		ObjectMeta: metav1.ObjectMeta{
			Name:            p.Name,
			Namespace:       p.Namespace,
			UID:             p.UID,
			ResourceVersion: p.ResourceVersion,
			Labels:          p.Labels,
		},
		NodeName: p.Spec.NodeName,
		Priority: p.Spec.Priority,
		Phase:    p.Status.Phase,
	}, nil
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
