package decision

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// NodeSource gives a node as an informer holds it, with its labels, taints
// and unschedulable mark (implemented by whatever watches nodes for bind).
type NodeSource interface {
	Node(name string) (*v1.Node, bool)
}

// unschedulable is the taint kube-scheduler's NodeUnschedulable plugin
// checks a cordoned node's pods against.
var unschedulable = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}

// checkNode refuses to bind pod to the node name when the pod's hard node
// constraints rule it out, as kube-scheduler's NodeAffinity, TaintToleration
// and NodeUnschedulable filters would: a bind the scheduler did not filter
// must not place a pod where the scheduler never would. Resources are not
// checked: fitting them needs every pod on the node, which the scheduler's
// cache holds and regosched does not.
func (d *Decider) checkNode(ctx context.Context, pod *v1.Pod, name string) error {
	node, err := d.node(ctx, name)
	if err != nil {
		return err
	}
	refuse := func(why string) error {
		return fmt.Errorf("%w: binding %s/%s to %s: %s", ErrRefused, pod.Namespace, pod.Name, name, why)
	}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	switch {
	case err != nil:
		return refuse(fmt.Sprintf("the pod's required node affinity cannot be read: %v", err))
	case !ok:
		return refuse("the node does not match the pod's node selector or required node affinity")
	}
	// Comparison operators in tolerations are an alpha feature, off by
	// default in kube-scheduler v1.37: tolerations are read as it reads them.
	const comparisonOperators = false
	noSchedule := func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}
	if taint, found := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, pod.Spec.Tolerations, noSchedule, comparisonOperators); found {
		return refuse("the pod does not tolerate the node's taint " + taint.ToString())
	}
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logr.Discard(), pod.Spec.Tolerations, &unschedulable, comparisonOperators) {
		return refuse("the node is unschedulable (cordoned)")
	}
	return nil
}

// node is the node name from Options.Nodes, else read from the API.
func (d *Decider) node(ctx context.Context, name string) (*v1.Node, error) {
	if d.opts.Nodes != nil {
		if n, ok := d.opts.Nodes.Node(name); ok {
			return n, nil
		}
		return nil, fmt.Errorf("%w: node %q is not known to regosched", ErrRefused, name)
	}
	n, err := d.opts.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s to bind to: %w", name, err)
	}
	return n, nil
}
