package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unique"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/placement"
)

// claims is what a policy's claims rule answered for one pod: what the pod
// is to its peers (marks) and whom it avoids (separate: hard, on the node;
// spread: soft, on a topology domain). Judge joins the pending pod's
// separate and spread with its peers' marks in Go, which costs nanoseconds
// per peer where a pairwise Rego rule costs tens of microseconds.
//
// Strings are interned: every pod of a cluster carries the same marks and
// descriptions, so a cached pod holds handles (8 bytes each), and the join
// compares handles instead of strings.
type claims struct {
	marks    []mark
	separate []avoid
	spread   []avoid
	// marked, avoiding: whether marks, and separate and spread, were
	// evaluated (a view of the pod may hold only some parts).
	marked, avoiding bool
}

type mark struct {
	token unique.Handle[string]
	// what describes the pod in a denial; {pod} stands for its namespace/name.
	what unique.Handle[string]
}

type avoid struct {
	mark, rule  unique.Handle[string]
	topologyKey unique.Handle[string] // spread only
	weight      float64               // spread only
}

// podPlaceholder in a mark's description is replaced by the peer's
// namespace/name.
const podPlaceholder = "{pod}"

// newClaims reads the value of the claims rule:
//
//	{"marks": {token: description}, "separate": [{mark, rule}],
//	 "spread": [{mark, rule, topology_key, weight}]}
//
// where separate and spread are arrays or sets and every field but weight
// (default 1) is required.
func newClaims(v ast.Value) (*claims, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("%s: %v is not an object", ClaimsRule, v)
	}
	return readClaims(func(field string) *ast.Term { return obj.Get(ast.StringTerm(field)) })
}

// readClaims reads claims from their parts; part returns nil for a part
// that is not defined.
func readClaims(part func(field string) *ast.Term) (*claims, error) {
	c := &claims{}
	if t := part("marks"); t != nil {
		marks, ok := t.Value.(ast.Object)
		if !ok {
			return nil, fmt.Errorf("%s: marks %v is not an object", ClaimsRule, t)
		}
		err := marks.Iter(func(k, v *ast.Term) error {
			token, ok1 := k.Value.(ast.String)
			what, ok2 := v.Value.(ast.String)
			if !ok1 || !ok2 {
				return fmt.Errorf("%s: mark %v: %v is not a string to a string", ClaimsRule, k, v)
			}
			c.marks = append(c.marks, mark{unique.Make(string(token)), unique.Make(string(what))})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var err error
	if c.separate, err = readAvoids(part("separate"), "separate", false); err != nil {
		return nil, err
	}
	if c.spread, err = readAvoids(part("spread"), "spread", true); err != nil {
		return nil, err
	}
	return c, nil
}

func readAvoids(t *ast.Term, field string, soft bool) ([]avoid, error) {
	if t == nil {
		return nil, nil
	}
	var out []avoid
	err := forEachObject(t.Value, ClaimsRule+" "+field, func(t *ast.Term, o ast.Object) error {
		a := avoid{mark: unique.Make(str(o, "mark")), rule: unique.Make(str(o, "rule")), weight: 1}
		if a.mark.Value() == "" || a.rule.Value() == "" {
			return fmt.Errorf("%s %s: %v needs a string mark and rule", ClaimsRule, field, t)
		}
		if soft {
			key := str(o, "topology_key")
			if key == "" {
				return fmt.Errorf("%s %s: %v has no topology_key", ClaimsRule, field, t)
			}
			a.topologyKey = unique.Make(key)
			if w := o.Get(ast.StringTerm("weight")); w != nil {
				n, _ := w.Value.(ast.Number)
				f, ok := n.Float64()
				if !ok || f < 0 {
					return fmt.Errorf("%s %s: weight of %v is not a non-negative number", ClaimsRule, field, t)
				}
				a.weight = f
			}
		}
		out = append(out, a)
		return nil
	})
	return out, err
}

// what returns the description of token among the marks.
func (c *claims) what(token unique.Handle[string]) (unique.Handle[string], bool) {
	for _, m := range c.marks {
		if m.token == token {
			return m.what, true
		}
	}
	return unique.Handle[string]{}, false
}

// claimsOf returns the claims of pod under p, with its marks (asPeer) or
// with what it avoids: those Describe kept with it, else (a pod re-read
// from the API, described under another policy, or for the other role)
// evaluated now.
func (p *Policy) claimsOf(ctx context.Context, pod *placement.Pod, asPeer bool) (*claims, error) {
	if !p.claims {
		return nil, nil
	}
	if f, ok := pod.Facts.(*Facts); ok && f.policy == p && f.claims != nil &&
		((asPeer && f.claims.marked) || (!asPeer && f.claims.avoiding)) {
		return f.claims, nil
	}
	view := &p.asPending // the view it is needed in, cheaper than all
	if asPeer {
		view = &p.asPeer
	}
	_, facts, err := p.describe(ctx, view, pod)
	if err != nil {
		return nil, err
	}
	if f, ok := facts.(*Facts); ok {
		return f.claims, nil
	}
	return nil, nil
}

// join applies the pending pod's separate (when conflicts is set) and
// spread (when penalties is set) entries to every bound peer whose marks
// hold their mark, as data.regosched.join of the default policy does in Rego.
func (p *Policy) join(ctx context.Context, in *Input, conflicts *[]Conflict, penalties *[]Penalty) error {
	mine, err := p.claimsOf(ctx, in.Pod, false)
	if err != nil || mine == nil || (len(mine.separate) == 0 && len(mine.spread) == 0) {
		return err
	}
	var cs []Conflict
	var ps []Penalty
	for _, peer := range in.Peers {
		if peer.Node == "" || peer.UID == in.Pod.UID {
			continue
		}
		theirs, err := p.claimsOf(ctx, peer, true)
		if err != nil {
			return fmt.Errorf("claims of peer %s: %w", peer.Key(), err)
		}
		if theirs == nil {
			continue
		}
		if conflicts != nil {
			for _, s := range mine.separate {
				if what, ok := theirs.what(s.mark); ok {
					cs = append(cs, Conflict{
						Node:   peer.Node,
						Rule:   s.rule.Value(),
						Reason: strings.Replace(what.Value(), podPlaceholder, peer.Key(), 1),
						Peer:   peer.UID,
					})
				}
			}
		}
		if penalties != nil {
			for _, s := range mine.spread {
				if _, ok := theirs.what(s.mark); !ok {
					continue
				}
				key := s.topologyKey.Value()
				value := peer.Node
				if key != HostnameKey {
					if value = in.Nodes[peer.Node][key]; value == "" {
						continue // a node without the label is in no domain
					}
				}
				ps = append(ps, Penalty{TopologyKey: key, Value: value, Weight: s.weight, Rule: s.rule.Value(), Peer: peer.UID})
			}
		}
	}
	if conflicts != nil {
		*conflicts = append(*conflicts, cs...)
	}
	if penalties != nil {
		*penalties = append(*penalties, ps...)
	}
	return nil
}

// HostnameKey is the topology key that names a node: its domain is the node
// itself, labelled or not.
const HostnameKey = "kubernetes.io/hostname"

// canonicalConflicts orders conflicts by node, peer, reason, rule and drops
// duplicates, as a Rego set of them would.
func canonicalConflicts(cs []Conflict) []Conflict {
	slices.SortFunc(cs, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Peer, b.Peer),
			cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Rule, b.Rule))
	})
	return slices.Compact(cs)
}

// canonicalPenalties orders penalties by peer, rule, topology key, value,
// weight and drops duplicates, as a Rego set of them would.
func canonicalPenalties(ps []Penalty) []Penalty {
	slices.SortFunc(ps, func(a, b Penalty) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.TopologyKey, b.TopologyKey), cmp.Compare(a.Value, b.Value), cmp.Compare(a.Weight, b.Weight))
	})
	return slices.Compact(ps)
}
