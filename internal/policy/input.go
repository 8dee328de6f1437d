package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/placement"
)

// Input is what the conflicts and penalties rules see: the pending pod, its
// peers (bound pods that share a group with it) and the labels of the nodes
// those peers are on.
type Input struct {
	Pod   *placement.Pod
	Peers []*placement.Pod
	// Nodes maps each peer's node to its labels.
	Nodes map[string]map[string]string
}

// NewInput is the input for pod among peers, with the labels of the
// peers' nodes as nodeLabels (the placement cache's NodeLabels) gives them;
// a node it does not know is left out.
func NewInput(pod *placement.Pod, peers []*placement.Pod, nodeLabels func(node string) (map[string]string, bool)) *Input {
	nodes := make(map[string]map[string]string, len(peers))
	for _, p := range peers {
		if _, done := nodes[p.Node]; done {
			continue
		}
		if labels, ok := nodeLabels(p.Node); ok {
			nodes[p.Node] = labels
		}
	}
	return &Input{Pod: pod, Peers: peers, Nodes: nodes}
}

// value builds input for pol as a Rego value directly: cheaper than
// encoding JSON and having OPA parse it again.
func (in *Input) value(pol *Policy) ast.Value {
	peers := make([]*ast.Term, len(in.Peers))
	for i, p := range in.Peers {
		peers[i] = podTerm(pol, p)
	}
	nodes := ast.NewObject()
	for name, labels := range in.Nodes {
		nodes.Insert(ast.StringTerm(name), ast.ObjectTerm(
			ast.Item(ast.StringTerm("labels"), labelsTerm(labels))))
	}
	return ast.NewObject(
		ast.Item(ast.StringTerm("pod"), podTerm(pol, in.Pod)),
		ast.Item(ast.StringTerm("peers"), ast.ArrayTerm(peers...)),
		ast.Item(ast.StringTerm("nodes"), ast.NewTerm(nodes)),
	)
}

func podInput(pol *Policy, p *placement.Pod) ast.Value {
	return ast.NewObject(ast.Item(ast.StringTerm("pod"), podTerm(pol, p)))
}

// podTerm is the documented pod shape: name, namespace, uid, labels,
// priority, node ("" while pending) and, when pol computed them, facts.
func podTerm(pol *Policy, p *placement.Pod) *ast.Term {
	items := make([][2]*ast.Term, 0, 7)
	items = append(items,
		ast.Item(ast.StringTerm("name"), ast.StringTerm(p.Name)),
		ast.Item(ast.StringTerm("namespace"), ast.StringTerm(p.Namespace)),
		ast.Item(ast.StringTerm("uid"), ast.StringTerm(string(p.UID))),
		ast.Item(ast.StringTerm("labels"), podLabelsTerm(p.Labels)),
		ast.Item(ast.StringTerm("priority"), ast.IntNumberTerm(int(p.Priority))),
		ast.Item(ast.StringTerm("node"), ast.StringTerm(p.Node)),
	)
	if f, ok := p.Facts.(*Facts); ok && f.policy == pol && f.packed != "" {
		// Facts are ours (packed by Describe): a failure to unpack is a bug,
		// and leaving them out still gives the right answer, from labels.
		if t, err := f.term(); err == nil {
			items = append(items, ast.Item(ast.StringTerm("facts"), t))
		}
	}
	return ast.ObjectTerm(items...)
}

func labelsTerm(labels map[string]string) *ast.Term {
	items := make([][2]*ast.Term, 0, len(labels))
	for k, v := range labels {
		items = append(items, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	return ast.ObjectTerm(items...)
}

func podLabelsTerm(labels placement.Labels) *ast.Term {
	items := make([][2]*ast.Term, 0, labels.Len())
	for k, v := range labels.All() {
		items = append(items, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	return ast.ObjectTerm(items...)
}
