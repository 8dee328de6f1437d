package policy

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/placement"
)

// claims is what a policy's claims rule answered for one pod: what the pod
// is to its peers (marks) and whom it avoids (separate: hard, on the node;
// spread: soft, on a topology domain). Judge joins the pending pod's
// separate and spread with its peers' marks in Go, which costs nanoseconds
// per peer where a pairwise Rego rule costs tens of microseconds.
//
// The placement cache keeps the marks of every bound pod, so they are
// packed into one string: one allocation without pointers, which the
// garbage collector does not scan (interned strings, the first design, took
// about 800 bytes per pod in unique's maps once clusters are many and small,
// and forty heap objects).
type claims struct {
	// marks holds, for each mark, its token then its description (what
	// describes the pod in a denial; {pod} stands for its namespace/name),
	// each as a uvarint length and the bytes.
	marks    string
	separate []avoid
	spread   []avoid
	// marked, avoiding: whether marks, and separate and spread, were
	// evaluated (a view of the pod may hold only some parts).
	marked, avoiding bool
}

type avoid struct {
	mark, rule  string
	topologyKey string  // spread only
	weight      float64 // spread only
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
		var packed []byte
		err := marks.Iter(func(k, v *ast.Term) error {
			token, ok1 := k.Value.(ast.String)
			what, ok2 := v.Value.(ast.String)
			if !ok1 || !ok2 {
				return fmt.Errorf("%s: mark %v: %v is not a string to a string", ClaimsRule, k, v)
			}
			packed = appendString(appendString(packed, string(token)), string(what))
			return nil
		})
		if err != nil {
			return nil, err
		}
		c.marks = string(packed)
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

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// nextString reads a string appendString wrote at the start of s; ok is
// false at the end of s.
func nextString(s string) (str, rest string, ok bool) {
	var n uint64
	for i, shift := 0, uint(0); i < len(s) && i < binary.MaxVarintLen64; i, shift = i+1, shift+7 {
		b := s[i]
		n |= uint64(b&0x7f) << shift
		if b < 0x80 {
			if end := uint64(i + 1); n <= uint64(len(s))-end {
				return s[end : end+n], s[end+n:], true
			}
			break
		}
	}
	return "", "", false
}

// eachMark calls f with the token and description of every mark until f
// returns false.
func (c *claims) eachMark(f func(token, what string) bool) {
	for s := c.marks; ; {
		token, rest, ok1 := nextString(s)
		what, rest, ok2 := nextString(rest)
		if !ok1 || !ok2 || !f(token, what) {
			return
		}
		s = rest
	}
}

// what returns the description of token among the marks.
func (c *claims) what(token string) (what string, found bool) {
	c.eachMark(func(t, w string) bool {
		if t == token {
			what, found = w, true
		}
		return !found
	})
	return what, found
}

func readAvoids(t *ast.Term, field string, soft bool) ([]avoid, error) {
	if t == nil {
		return nil, nil
	}
	var out []avoid
	err := forEachObject(t.Value, ClaimsRule+" "+field, func(t *ast.Term, o ast.Object) error {
		a := avoid{mark: str(o, "mark"), rule: str(o, "rule"), weight: 1}
		if a.mark == "" || a.rule == "" {
			return fmt.Errorf("%s %s: %v needs a string mark and rule", ClaimsRule, field, t)
		}
		if soft {
			key := str(o, "topology_key")
			if key == "" {
				return fmt.Errorf("%s %s: %v has no topology_key", ClaimsRule, field, t)
			}
			a.topologyKey = key
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
						Rule:   s.rule,
						Reason: strings.Replace(what, podPlaceholder, peer.Key(), 1),
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
				key := s.topologyKey
				value := peer.Node
				if key != HostnameKey {
					if value = in.Nodes[peer.Node][key]; value == "" {
						continue // a node without the label is in no domain
					}
				}
				ps = append(ps, Penalty{TopologyKey: key, Value: value, Weight: s.weight, Rule: s.rule, Peer: peer.UID})
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
