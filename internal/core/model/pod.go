package model

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod is what a placement policy knows of a pod: its identity, labels, priority
// and node. Values are never modified after they are built, so they may be
// shared between goroutines without copying.
type Pod struct {
	Namespace string
	Name      string
	UID       types.UID
	Labels    Labels
	Priority  int32
	// Node is the node the pod is bound to; empty for a pending pod.
	Node string
	// StatefulSet names the StatefulSet that controls the pod, in its
	// namespace; empty for a pod of none. Its replicas tell the size of a
	// group whose members it holds (a quorum's).
	StatefulSet string
	// Claims is what the policy said of this pod when it was grouped (the
	// KeyFunc's claims), handed back to the policy with the pod; nil when
	// it said nothing more than the groups.
	Claims *Claims
}

// PodFromObject returns the policy view of a Kubernetes pod.
func PodFromObject(p *corev1.Pod) *Pod {
	var prio int32
	if p.Spec.Priority != nil {
		prio = *p.Spec.Priority
	}
	return &Pod{
		Namespace:   p.Namespace,
		Name:        p.Name,
		UID:         p.UID,
		Labels:      NewLabels(p.Labels),
		Priority:    prio,
		Node:        p.Spec.NodeName,
		StatefulSet: StatefulSetOf(p),
	}
}

// StatefulSetOf is the name of the StatefulSet that controls p, or "".
func StatefulSetOf(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "StatefulSet" && strings.HasPrefix(o.APIVersion, "apps/") {
			return o.Name
		}
	}
	return ""
}

// Key is the pod's namespace/name, as informers key it.
func (p *Pod) Key() string { return PodKey(p.Namespace, p.Name) }

// PodKey is namespace/name, as informers key a pod.
func PodKey(namespace, name string) string { return namespace + "/" + name }
