package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/test/fixture"
)

// KwokToleration lets a pod go to kwok's nodes, which are tainted so that
// the other tests' pods, which know nothing of them, never land there.
func KwokToleration() corev1.Toleration {
	return corev1.Toleration{Key: KwokNodeAnnotation, Operator: corev1.TolerationOpEqual, Value: KwokNodeValue, Effect: corev1.TaintEffectNoSchedule}
}

// kwokNode is the Node object of a kwok node: its marks, its zone, and a
// podCIDR of its own, from which kwok gives its pods their IPs. Its status
// is kwok's to write (capacity, addresses, Ready).
func kwokNode(name, zone, podCIDR string) *corev1.Node {
	n := fixture.MakeNode().Name(name).UID("").Hostname().Zone(zone).Label(KwokNodeLabel, KwokNodeValue).Obj()
	n.Annotations = map[string]string{KwokNodeAnnotation: KwokNodeValue}
	n.Spec.PodCIDR = podCIDR
	n.Spec.PodCIDRs = []string{podCIDR}
	n.Spec.Taints = []corev1.Taint{{Key: KwokNodeAnnotation, Value: KwokNodeValue, Effect: corev1.TaintEffectNoSchedule}}
	return n
}

// AddNodes creates a kwok node per name, in the zone of the same index,
// and returns once kwok reports each Ready with its InternalIP. Names must
// not exist yet; the caller deletes them (DeleteNodes) when done, so that
// later tests that count the cluster's nodes do not see them.
func (k *Kwok) AddNodes(ctx context.Context, names, zones []string) error {
	if len(names) != len(zones) {
		return fmt.Errorf("creating kwok nodes: %d names but %d zones", len(names), len(zones))
	}
	nodes := k.c.client.CoreV1().Nodes()
	for i, name := range names {
		cidr, err := k.nextCIDR()
		if err != nil {
			return err
		}
		if _, err := nodes.Create(ctx, kwokNode(name, zones[i], cidr), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating kwok node %s: %w", name, err)
		}
	}
	for _, name := range names {
		err := k.c.poll(ctx, k.Process, "kwok to report node "+name+" ready", func(ctx context.Context) (bool, error) {
			n, err := nodes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("getting node %s: %w", name, err)
			}
			return nodeReady(n) && hasAddress(n, k.NodeIP), nil
		})
		if err != nil {
			return err
		}
	}
	k.c.log.WithField("nodes", names).Info("kwok nodes ready")
	return nil
}

// DeleteNodes deletes the named nodes; a node already gone is no error.
func (k *Kwok) DeleteNodes(ctx context.Context, names ...string) error {
	for _, name := range names {
		err := k.c.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting kwok node %s: %w", name, err)
		}
	}
	return nil
}

// nodeReady reports whether n's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hasAddress reports whether n lists ip among its InternalIPs.
func hasAddress(n *corev1.Node, ip string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address == ip {
			return true
		}
	}
	return false
}
