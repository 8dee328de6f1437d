package placement

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripPod is the informer transform for pods: it keeps only what placement
// decisions read, so that a large cluster's pods cost little memory. It runs
// before an object enters the informer's store.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		// Tombstones (cache.DeletedFinalStateUnknown) and other values pass unchanged.
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            p.Name,
			Namespace:       p.Namespace,
			UID:             p.UID,
			ResourceVersion: p.ResourceVersion,
			Labels:          p.Labels,
		},
		Spec: corev1.PodSpec{
			NodeName: p.Spec.NodeName,
			Priority: p.Spec.Priority,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
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
