package localstack

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localcluster"
)

// Violations lists every pair of bound pods that breaks one of the default
// policy's hard rules, in the given namespaces (all when none is given):
//
//   - two Redis masters of a cluster on one node;
//   - a Redis master and a replica (or slave) of the same shard of a cluster
//     on one node;
//   - two Elasticsearch data pods of a cluster on one node.
//
// A cluster is a namespace plus an app.kubernetes.io/instance value. The
// rules are restated here in plain Go over the API server's pod list, on
// purpose without any regosched code or Rego: it is the independent judge of
// what regosched placed.
func (s *Stack) Violations(ctx context.Context, namespaces ...string) ([]string, error) {
	pods, err := s.listPods(ctx, namespaces)
	if err != nil {
		return nil, err
	}
	zoneOf, err := nodeZones(ctx, s.Client())
	if err != nil {
		return nil, err
	}
	return slices.Concat(Violations(pods), ZoneViolations(pods, zoneOf)), nil
}

// Violations checks pods as Stack.Violations does; it ignores pods that are
// not bound or have finished.
func Violations(pods []corev1.Pod) []string {
	type slot struct{ node, ns, cluster string }
	byNode := map[slot][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if !occupiesNode(p) || p.Labels[fixture.LabelInstance] == "" {
			continue
		}
		k := slot{p.Spec.NodeName, p.Namespace, p.Labels[fixture.LabelInstance]}
		byNode[k] = append(byNode[k], p)
	}
	var out []string
	for k, group := range byNode {
		for i, a := range group {
			for _, b := range group[i+1:] {
				if rule := conflict(a, b); rule != "" {
					out = append(out, fmt.Sprintf("node %s: %s/%s and %s/%s (%s)",
						k.node, a.Namespace, a.Name, b.Namespace, b.Name, rule))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// conflict names the rule that a and b, pods of the same cluster on the same
// node, break, or returns "".
func conflict(a, b *corev1.Pod) string {
	app := a.Labels[fixture.LabelName]
	if app != b.Labels[fixture.LabelName] {
		return ""
	}
	ra, rb := role(a.Labels), role(b.Labels)
	switch app {
	case "redis":
		if ra == "master" && rb == "master" {
			return "two redis masters of a cluster"
		}
		if (ra == "master" && rb == "replica" || ra == "replica" && rb == "master") &&
			a.Labels[fixture.LabelShard] == b.Labels[fixture.LabelShard] {
			return "redis master and replica of a shard"
		}
	case "elasticsearch":
		if ra == "data" && rb == "data" {
			return "two elasticsearch data pods of a cluster"
		}
	}
	return ""
}

// role is a pod's app.kubernetes.io/component, with Redis's old "slave"
// read as replica.
func role(labels map[string]string) string {
	r := labels[fixture.LabelComponent]
	if r == "slave" && labels[fixture.LabelName] == "redis" {
		return "replica"
	}
	return r
}

// Describe says what a pod is in a placement table, e.g.
// "redis cache master, shard 0" or "elasticsearch logs data"; "plain pod"
// for a pod that no rule concerns.
func Describe(labels map[string]string) string {
	app, cluster := labels[fixture.LabelName], labels[fixture.LabelInstance]
	if cluster == "" || (app != "redis" && app != "elasticsearch") {
		return "plain pod"
	}
	d := app + " " + cluster
	if r := labels[fixture.LabelComponent]; r != "" {
		d += " " + r
	}
	if sh := labels[fixture.LabelShard]; app == "redis" && sh != "" {
		d += ", shard " + sh
	}
	return d
}

// PodSummary names a pod and says what it is.
type PodSummary struct {
	Namespace   string
	Name        string
	Description string // see Describe
}

// String is "namespace/name (description)".
func (p PodSummary) String() string {
	return fmt.Sprintf("%s/%s (%s)", p.Namespace, p.Name, p.Description)
}

// NodePlacement is a node and the pods bound to it.
type NodePlacement struct {
	Node string
	Zone string
	Pods []PodSummary // sorted by namespace and name
}

// PendingPod is a pod not bound to any node and the scheduler's last word on
// it ("" if it has not given one yet).
type PendingPod struct {
	PodSummary
	Reason string
}

// Placement is where pods are, node by node.
type Placement struct {
	Nodes   []NodePlacement // every node, sorted by name, empty ones too
	Pending []PendingPod    // sorted by namespace and name
}

// Placement returns the pods of the given namespaces (all when none is
// given) node by node, and the pending ones with their FailedScheduling
// message.
func (s *Stack) Placement(ctx context.Context, namespaces ...string) (Placement, error) {
	nodes, err := s.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Placement{}, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := s.listPods(ctx, namespaces)
	if err != nil {
		return Placement{}, err
	}
	var pl Placement
	index := map[string]int{}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes.Items {
		index[n.Name] = len(pl.Nodes)
		pl.Nodes = append(pl.Nodes, NodePlacement{Node: n.Name, Zone: n.Labels[localcluster.LabelZone]})
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for i := range pods {
		p := &pods[i]
		sum := PodSummary{Namespace: p.Namespace, Name: p.Name, Description: Describe(p.Labels)}
		switch {
		case occupiesNode(p):
			j, ok := index[p.Spec.NodeName]
			if !ok {
				// Bound to a node that is gone: still worth showing.
				j = len(pl.Nodes)
				index[p.Spec.NodeName] = j
				pl.Nodes = append(pl.Nodes, NodePlacement{Node: p.Spec.NodeName, Zone: "?"})
			}
			pl.Nodes[j].Pods = append(pl.Nodes[j].Pods, sum)
		case p.Spec.NodeName == "":
			reason, err := s.FailedSchedulingReason(ctx, p)
			if err != nil {
				return Placement{}, err
			}
			pl.Pending = append(pl.Pending, PendingPod{PodSummary: sum, Reason: reason})
		}
	}
	return pl, nil
}

// listPods lists the pods of namespaces, or of all namespaces.
func (s *Stack) listPods(ctx context.Context, namespaces []string) ([]corev1.Pod, error) {
	return listPods(ctx, s.Client(), namespaces)
}

// listPods lists through client the pods of namespaces, or of all.
func listPods(ctx context.Context, client kubernetes.Interface, namespaces []string) ([]corev1.Pod, error) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var pods []corev1.Pod
	for _, ns := range namespaces {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing pods: %w", err)
		}
		pods = append(pods, list.Items...)
	}
	return pods, nil
}
