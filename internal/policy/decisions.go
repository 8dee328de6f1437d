package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/placement"
)

// Conflict says that the pending pod must not share Node with the peer Peer.
type Conflict struct {
	Node   string
	Rule   string
	Reason string
	Peer   types.UID
}

// Penalty makes every node whose label TopologyKey equals Value less
// preferred by Weight. The key kubernetes.io/hostname matches the node name.
type Penalty struct {
	TopologyKey string
	Value       string
	Weight      float64
	Rule        string
	Peer        types.UID
}

// SumByDomain sums penalties per topology key and value: what a node in
// that domain is penalised, before the other keys' domains it is also in.
func SumByDomain(penalties []Penalty) map[string]map[string]float64 {
	byKey := map[string]map[string]float64{}
	for _, p := range penalties {
		if byKey[p.TopologyKey] == nil {
			byKey[p.TopologyKey] = map[string]float64{}
		}
		byKey[p.TopologyKey][p.Value] += p.Weight
	}
	return byKey
}

// PeerKeys evaluates the groups pod belongs to.
func (p *Policy) PeerKeys(ctx context.Context, pod *placement.Pod) ([]string, error) {
	v, err := eval(ctx, p.keys, podInput(p, pod))
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", PeerKeysRule, err)
	}
	return decodeKeys(v)
}

// Describe evaluates the groups pod belongs to and, when the policy defines
// them, its facts and claims, in one pass. facts is a *Facts to store as the
// pod's placement.Pod.Facts, or nil (no typed nil: it is assigned as is) for
// a pod in no group (it is never anyone's peer) or when the policy has
// neither rule.
func (p *Policy) Describe(ctx context.Context, pod *placement.Pod) (keys []string, facts any, err error) {
	return p.describe(ctx, &p.all, pod)
}

// DescribePending is Describe for the pending pod of a request: of the
// claims, only what it avoids (separate, spread), not its marks, which only
// its future peers read.
func (p *Policy) DescribePending(ctx context.Context, pod *placement.Pod) (keys []string, facts any, err error) {
	return p.describe(ctx, &p.asPending, pod)
}

// DescribePeer is Describe for a bound pod, as somebody's peer: of the
// claims, only its marks.
func (p *Policy) DescribePeer(ctx context.Context, pod *placement.Pod) (keys []string, facts any, err error) {
	return p.describe(ctx, &p.asPeer, pod)
}

func (p *Policy) describe(ctx context.Context, d *description, pod *placement.Pod) (keys []string, facts any, err error) {
	if d.query == nil {
		keys, err = p.PeerKeys(ctx, pod)
		return keys, nil, err
	}
	v, err := eval(ctx, *d.query, podInput(p, pod))
	if err != nil {
		return nil, nil, fmt.Errorf("evaluating %s: %w", d.rules, err)
	}
	arr, ok := v.(*ast.Array)
	if v == nil || !ok || arr.Len() != d.n {
		// Undefined peer_keys (the optional parts never are): keys alone.
		keys, err = p.PeerKeys(ctx, pod)
		return keys, nil, err
	}
	if keys, err = decodeKeys(arr.Elem(0).Value); err != nil || len(keys) == 0 {
		return keys, nil, err
	}
	// one unwraps an optional part: nil when undefined for this pod.
	one := func(at int) *ast.Term {
		if a, ok := arr.Elem(at).Value.(*ast.Array); ok && a.Len() == 1 {
			return a.Elem(0)
		}
		return nil
	}
	f := &Facts{policy: p}
	if d.factsAt > 0 {
		if t := one(d.factsAt); t != nil {
			if f.packed, err = packFacts(t.Value); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(d.claims) > 0 {
		f.claims, err = readClaims(func(name string) *ast.Term {
			for _, part := range d.claims {
				if part.name == name {
					return one(part.at)
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		f.claims.marked, f.claims.avoiding = d.marks, d.avoids
	} else if f.packed == "" {
		return keys, nil, nil // nothing to keep
	}
	return keys, f, nil
}

// DescribeTimeout bounds each evaluation off the request path (a pod
// described by the informers, one at a time and once per pod at every
// policy reload, and Compile's own evaluations of a new bundle): a sane
// policy takes microseconds, so a few seconds fail only one that loops,
// which would otherwise hold up every later pod event behind it for good.
const DescribeTimeout = 3 * time.Second

// offRequest returns ctx cut short after p's DescribeTimeout.
func (p *Policy) offRequest(ctx context.Context) (context.Context, context.CancelFunc) {
	d := p.describeTimeout
	if d <= 0 { // not made by Compile
		d = DescribeTimeout
	}
	return context.WithTimeout(ctx, d)
}

// Describer adapts DescribePeer to the placement cache's KeyFunc, for the
// policy that current gives at each call. Each call is cut short after
// DescribeTimeout: the informer's context never ends.
func Describer(current func() *Policy) func(context.Context, *placement.Pod) ([]string, any, error) {
	return func(ctx context.Context, pod *placement.Pod) ([]string, any, error) {
		p := current()
		if p == nil {
			return nil, nil, fmt.Errorf("describing pod %s: %w", pod.Key(), errNoPolicy)
		}
		ctx, cancel := p.offRequest(ctx)
		defer cancel()
		keys, facts, err := p.DescribePeer(ctx, pod)
		if err != nil {
			return nil, nil, fmt.Errorf("describing pod %s: %w", pod.Key(), err)
		}
		return keys, facts, nil
	}
}

// PendingDescriber adapts DescribePending to placement.Pending, for the
// policy that current gives at each call, which it names as the describer.
// Each call is cut short after DescribeTimeout, as Describer's.
func PendingDescriber(current func() *Policy) placement.DescribeFunc {
	return func(ctx context.Context, pod *placement.Pod) ([]string, any, any, error) {
		p := current()
		if p == nil {
			return nil, nil, nil, fmt.Errorf("describing pod %s: %w", pod.Key(), errNoPolicy)
		}
		ctx, cancel := p.offRequest(ctx)
		defer cancel()
		keys, facts, err := p.DescribePending(ctx, pod)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("describing pod %s: %w", pod.Key(), err)
		}
		return keys, facts, p, nil
	}
}

var errNoPolicy = errors.New("no active policy")

func decodeKeys(v ast.Value) ([]string, error) {
	var keys []string
	err := forEach(v, func(t *ast.Term) error {
		s, ok := t.Value.(ast.String)
		if !ok {
			return fmt.Errorf("%s: key %v is not a string", PeerKeysRule, t)
		}
		keys = append(keys, string(s))
		return nil
	})
	return keys, err
}

// Conflicts gives the hard rules that hold between the pending pod and its
// peers: the join of their claims and the conflicts rule, each when the
// policy defines it.
func (p *Policy) Conflicts(ctx context.Context, in *Input) ([]Conflict, error) {
	var out []Conflict
	if p.claims {
		if err := p.join(ctx, in, &out, nil); err != nil {
			return nil, err
		}
	}
	out, err := p.pairwiseConflicts(ctx, in, out)
	if err != nil {
		return nil, err
	}
	return canonicalConflicts(out), nil
}

// pairwiseConflicts appends what the conflicts rule answers, if defined.
func (p *Policy) pairwiseConflicts(ctx context.Context, in *Input, out []Conflict) ([]Conflict, error) {
	if p.conflicts == nil {
		return out, nil
	}
	v, err := eval(ctx, *p.conflicts, in.value(p))
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", ConflictsRule, err)
	}
	return decodeConflicts(out, v)
}

// Judge gives the hard and the soft rules at once, cheaper than Conflicts
// and Penalties apart: both start from the same claims, and the Rego rules
// (when defined) from matching the same peers.
func (p *Policy) Judge(ctx context.Context, in *Input) ([]Conflict, []Penalty, error) {
	var conflicts []Conflict
	var penalties []Penalty
	if p.claims {
		if err := p.join(ctx, in, &conflicts, &penalties); err != nil {
			return nil, nil, err
		}
	}
	if p.both == nil { // one of the pairwise rules at most
		var err error
		if conflicts, err = p.pairwiseConflicts(ctx, in, conflicts); err != nil {
			return nil, nil, err
		}
		if penalties, err = p.pairwisePenalties(ctx, in, penalties); err != nil {
			return nil, nil, err
		}
		return canonicalConflicts(conflicts), canonicalPenalties(penalties), nil
	}
	v, err := eval(ctx, *p.both, in.value(p))
	if err != nil {
		return nil, nil, fmt.Errorf("evaluating %s and %s: %w", ConflictsRule, PenaltiesRule, err)
	}
	if v != nil {
		arr, ok := v.(*ast.Array)
		if !ok || arr.Len() != 2 {
			return nil, nil, fmt.Errorf("evaluating %s and %s: unexpected result %v", ConflictsRule, PenaltiesRule, v)
		}
		if conflicts, err = decodeConflicts(conflicts, arr.Elem(0).Value); err != nil {
			return nil, nil, err
		}
		if penalties, err = decodePenalties(penalties, arr.Elem(1).Value); err != nil {
			return nil, nil, err
		}
	}
	return canonicalConflicts(conflicts), canonicalPenalties(penalties), nil
}

// decodeConflicts appends the conflicts of rule value v to out.
func decodeConflicts(out []Conflict, v ast.Value) ([]Conflict, error) {
	err := forEachObject(v, ConflictsRule, func(t *ast.Term, o ast.Object) error {
		c := Conflict{
			Node:   str(o, "node"),
			Rule:   str(o, "rule"),
			Reason: str(o, "reason"),
			Peer:   types.UID(str(o, "peer")),
		}
		if c.Node == "" {
			return fmt.Errorf("%s: %v has no node", ConflictsRule, t)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// Penalties gives the soft rules that hold between the pending pod and its
// peers: the join of their claims and the penalties rule, each when the
// policy defines it.
func (p *Policy) Penalties(ctx context.Context, in *Input) ([]Penalty, error) {
	var out []Penalty
	if p.claims {
		if err := p.join(ctx, in, nil, &out); err != nil {
			return nil, err
		}
	}
	out, err := p.pairwisePenalties(ctx, in, out)
	if err != nil {
		return nil, err
	}
	return canonicalPenalties(out), nil
}

// pairwisePenalties appends what the penalties rule answers, if defined.
func (p *Policy) pairwisePenalties(ctx context.Context, in *Input, out []Penalty) ([]Penalty, error) {
	if p.penalties == nil {
		return out, nil
	}
	v, err := eval(ctx, *p.penalties, in.value(p))
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", PenaltiesRule, err)
	}
	return decodePenalties(out, v)
}

// decodePenalties appends the penalties of rule value v to out.
func decodePenalties(out []Penalty, v ast.Value) ([]Penalty, error) {
	err := forEachObject(v, PenaltiesRule, func(t *ast.Term, o ast.Object) error {
		pen := Penalty{
			TopologyKey: str(o, "topology_key"),
			Value:       str(o, "value"),
			Weight:      1,
			Rule:        str(o, "rule"),
			Peer:        types.UID(str(o, "peer")),
		}
		if w := o.Get(ast.StringTerm("weight")); w != nil {
			n, _ := w.Value.(ast.Number)
			f, ok := n.Float64()
			if !ok || f < 0 {
				return fmt.Errorf("%s: weight of %v is not a non-negative number", PenaltiesRule, t)
			}
			pen.Weight = f
		}
		if pen.TopologyKey == "" {
			return fmt.Errorf("%s: %v has no topology_key", PenaltiesRule, t)
		}
		out = append(out, pen)
		return nil
	})
	return out, err
}

// Protected reports whether the policy forbids evicting pod to make room
// for another (e.g. a Redis master). False when the bundle has no such rule.
func (p *Policy) Protected(ctx context.Context, pod *placement.Pod) (bool, error) {
	if p.protected == nil {
		return false, nil
	}
	v, err := eval(ctx, *p.protected, podInput(p, pod))
	if err != nil {
		return false, fmt.Errorf("evaluating %s: %w", ProtectedRule, err)
	}
	switch b := v.(type) {
	case nil:
		return false, nil
	case ast.Boolean:
		return bool(b), nil
	default:
		return false, fmt.Errorf("%s: %v is not a boolean", ProtectedRule, v)
	}
}

// smokeTest evaluates every entry point once on a pod and a peer that share
// all labels, so that runtime errors of a new policy surface at load time.
// Each is cut short after DescribeTimeout, so that a policy that loops is
// refused rather than hanging a reload.
func (p *Policy) smokeTest(ctx context.Context) error {
	labels := placement.NewLabels(map[string]string{"app.kubernetes.io/name": "sample", "app.kubernetes.io/instance": "sample"})
	pod := &placement.Pod{Namespace: "default", Name: "sample-0", UID: "sample-0", Labels: labels}
	peer := &placement.Pod{Namespace: "default", Name: "sample-1", UID: "sample-1", Labels: labels, Node: "node-0"}
	in := &Input{Pod: pod, Peers: []*placement.Pod{peer}, Nodes: map[string]map[string]string{"node-0": {}}}
	steps := []func(context.Context) error{
		func(ctx context.Context) (err error) { _, err = p.PeerKeys(ctx, pod); return err },
		func(ctx context.Context) (err error) { _, pod.Facts, err = p.Describe(ctx, pod); return err },
		func(ctx context.Context) (err error) { _, peer.Facts, err = p.Describe(ctx, peer); return err },
		func(ctx context.Context) (err error) { _, err = p.Conflicts(ctx, in); return err },
		func(ctx context.Context) (err error) { _, err = p.Penalties(ctx, in); return err },
		func(ctx context.Context) (err error) { _, err = p.Unprotected(ctx, pod); return err },
		func(ctx context.Context) (err error) { _, err = p.Protected(ctx, peer); return err },
	}
	for _, step := range steps {
		ctx, cancel := p.offRequest(ctx)
		err := step(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// forEachObject visits the objects of rule's result v.
func forEachObject(v ast.Value, rule string, f func(*ast.Term, ast.Object) error) error {
	return forEach(v, func(t *ast.Term) error {
		o, ok := t.Value.(ast.Object)
		if !ok {
			return fmt.Errorf("%s: %v is not an object", rule, t)
		}
		return f(t, o)
	})
}

// forEach visits the members of a set or array; undefined (nil) is empty.
func forEach(v ast.Value, f func(*ast.Term) error) error {
	var err error
	visit := func(t *ast.Term) {
		if err == nil {
			err = f(t)
		}
	}
	switch x := v.(type) {
	case nil:
	case ast.Set:
		x.Foreach(visit)
	case *ast.Array:
		x.Foreach(visit)
	default:
		return fmt.Errorf("result %v is neither a set nor an array", v)
	}
	return err
}

func str(o ast.Object, key string) string {
	if t := o.Get(ast.StringTerm(key)); t != nil {
		if s, ok := t.Value.(ast.String); ok {
			return string(s)
		}
	}
	return ""
}
