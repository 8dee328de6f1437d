package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/core/model"
)

// Input is what Judge joins: the pending pod, its peers (bound pods that
// share a group with it) and the labels of the nodes those peers are on.
type Input struct {
	Pod   *model.Pod
	Peers []*model.Pod
	// Nodes maps each peer's node to its labels.
	Nodes map[string]map[string]string
	// Domains, if set, counts the domains of a topology key in the
	// cluster; unset, every rule per domain is taken to be satisfiable.
	Domains func(key string) int
	// Replicas, if set, gives a StatefulSet's replicas, for the size of a
	// group whose members it holds.
	Replicas func(namespace, name string) (int, bool)
}

// Cluster is what a join reads of the cluster beyond the pods: nodes and
// StatefulSets (implemented by placement.Cache).
type Cluster interface {
	// NodeLabels returns a node's labels and whether the node is known.
	NodeLabels(name string) (map[string]string, bool)
	// Domains is how many domains of a topology key the known nodes make
	// up (the distinct values of its label).
	Domains(key string) int
	// Replicas is a StatefulSet's desired replicas, and whether it is known.
	Replicas(namespace, name string) (int, bool)
}

// NewInput is the input for pod among peers, with the labels of the
// peers' nodes as c gives them; a node it does not know is left out.
func NewInput(pod *model.Pod, peers []*model.Pod, c Cluster) *Input {
	labels := make(map[string]map[string]string, len(peers))
	for _, p := range peers {
		if _, done := labels[p.Node]; done {
			continue
		}
		if l, ok := c.NodeLabels(p.Node); ok {
			labels[p.Node] = l
		}
	}
	return &Input{Pod: pod, Peers: peers, Nodes: labels, Domains: c.Domains, Replicas: c.Replicas}
}

// podInput is {pod} for the rules that look at one pod.
func podInput(p *model.Pod) ast.Value {
	return ast.NewObject(ast.Item(ast.StringTerm("pod"), podTerm(p)))
}

// podTerm is the documented pod shape: name, namespace, uid, labels,
// priority and node ("" while pending).
func podTerm(p *model.Pod) *ast.Term {
	return ast.ObjectTerm(
		ast.Item(ast.StringTerm("name"), ast.StringTerm(p.Name)),
		ast.Item(ast.StringTerm("namespace"), ast.StringTerm(p.Namespace)),
		ast.Item(ast.StringTerm("uid"), ast.StringTerm(string(p.UID))),
		ast.Item(ast.StringTerm("labels"), podLabelsTerm(p.Labels)),
		ast.Item(ast.StringTerm("priority"), ast.IntNumberTerm(int(p.Priority))),
		ast.Item(ast.StringTerm("node"), ast.StringTerm(p.Node)),
	)
}

func podLabelsTerm(labels model.Labels) *ast.Term {
	items := make([][2]*ast.Term, 0, labels.Len())
	for k, v := range labels.All() {
		items = append(items, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	return ast.ObjectTerm(items...)
}
