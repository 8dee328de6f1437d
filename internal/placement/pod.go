// Package placement keeps a live, indexed view of where the pods that policies
// care about are running, and of the labels of every node.
//
// It is fed by client-go shared informers: its own (New), or kube-scheduler's
// when regosched runs inside it (NewFromInformers). Pods are stripped to the
// few fields a placement policy reads, and grouped under the keys a KeyFunc
// (the policy's peer_keys rule) gives them, so that finding the peers of a
// pending pod costs the same whatever the number of unrelated pods in the
// cluster.
package placement

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/claims"
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
	// Claims is what the policy said of this pod when it was grouped (the
	// KeyFunc's claims), handed back to the policy with the pod; nil when
	// it said nothing more than the groups.
	Claims *claims.Claims
}

// PodFromObject returns the policy view of a Kubernetes pod.
func PodFromObject(p *corev1.Pod) *Pod {
	var prio int32
	if p.Spec.Priority != nil {
		prio = *p.Spec.Priority
	}
	return &Pod{
		Namespace: p.Namespace,
		Name:      p.Name,
		UID:       p.UID,
		Labels:    NewLabels(p.Labels),
		Priority:  prio,
		Node:      p.Spec.NodeName,
	}
}

// Key is the pod's namespace/name, as informers key it.
func (p *Pod) Key() string { return podKey(p.Namespace, p.Name) }

func podKey(namespace, name string) string { return namespace + "/" + name }
