package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/packed"
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
// and forty heap objects). A pod's tokens share long prefixes (its
// workload, cluster and scope) and its marks come in pairs with one
// description (its role and "*"), so tokens are front-coded and a repeated
// description is one byte: a default-policy Redis master's four marks take
// about half the bytes they would in full.
type claims struct {
	// marks holds the marks in the order of their tokens, each as
	//
	//	uvarint(shared) uvarint(len(suffix)) suffix description
	//
	// where the token is the previous token's first shared bytes then
	// suffix, and the description (what describes the pod in a denial;
	// {pod} stands for its namespace/name) is uvarint(len<<1) then its
	// bytes, or uvarint(sameWhat) for the previous entry's description.
	// Readers take a cut-short or corrupt packing for the end of the marks.
	marks string
	// avoids is what the pod avoids; nil when it avoids nobody or that was
	// not evaluated, as for every bound pod the cache keeps (whose claims
	// are a part of its Facts, not an object of their own).
	avoids *avoids
	// marked, avoiding: whether marks, and separate and spread, were
	// evaluated (a view of the pod may hold only some parts); neither when
	// the policy has no claims rule.
	marked, avoiding bool
}

// same reports whether c and o hold the same claims.
func (c claims) same(o claims) bool {
	if c.marks != o.marks || c.marked != o.marked || c.avoiding != o.avoiding || (c.avoids == nil) != (o.avoids == nil) {
		return false
	}
	return c.avoids == nil || (slices.Equal(c.avoids.separate, o.avoids.separate) && slices.Equal(c.avoids.spread, o.avoids.spread))
}

type avoids struct {
	separate, spread []avoid
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
	c, err := readClaims(func(field string) *ast.Term { return obj.Get(ast.StringTerm(field)) })
	return &c, err
}

// readClaims reads claims from their parts; part returns nil for a part
// that is not defined.
func readClaims(part func(field string) *ast.Term) (claims, error) {
	var c claims
	if t := part("marks"); t != nil {
		marks, ok := t.Value.(ast.Object)
		if !ok {
			return claims{}, fmt.Errorf("%s: marks %v is not an object", ClaimsRule, t)
		}
		ms := make([]mark, 0, marks.Len())
		err := marks.Iter(func(k, v *ast.Term) error {
			token, ok1 := k.Value.(ast.String)
			what, ok2 := v.Value.(ast.String)
			if !ok1 || !ok2 {
				return fmt.Errorf("%s: mark %v: %v is not a string to a string", ClaimsRule, k, v)
			}
			ms = append(ms, mark{string(token), string(what)})
			return nil
		})
		if err != nil {
			return claims{}, err
		}
		c.marks = packMarks(ms)
	}
	separate, err := readAvoids(part("separate"), "separate", false)
	if err != nil {
		return claims{}, err
	}
	spread, err := readAvoids(part("spread"), "spread", true)
	if err != nil {
		return claims{}, err
	}
	if len(separate) > 0 || len(spread) > 0 {
		c.avoids = &avoids{separate: separate, spread: spread}
	}
	return c, nil
}

type mark struct{ token, what string }

// sameWhat, as a description's length field, stands for the previous
// entry's description; a new description's field is its length<<1.
const sameWhat = 1

// packMarks sorts ms, whose tokens are distinct, and packs them as
// claims.marks.
func packMarks(ms []mark) string {
	slices.SortFunc(ms, func(a, b mark) int { return strings.Compare(a.token, b.token) })
	var b []byte
	var prev mark
	for i, m := range ms {
		shared := commonPrefix(prev.token, m.token)
		b = packed.AppendUvarint(b, uint64(shared))
		b = packed.AppendString(b, m.token[shared:])
		if i > 0 && m.what == prev.what {
			b = packed.AppendUvarint(b, sameWhat)
		} else {
			b = append(packed.AppendUvarint(b, uint64(len(m.what))<<1), m.what...)
		}
		prev = m
	}
	return string(b)
}

// commonPrefix returns the length of the prefix a and b share.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// markReader reads packed marks entry by entry, without copying.
type markReader struct {
	rest     string
	read     bool   // whether an entry was read
	tokenLen int    // length of the last token read
	what     string // description of the last entry read
}

// next reads the next entry, whose token is the last token's first shared
// bytes then suffix, and whose description is then r.what. ok is false at
// the end of the marks, or where the packing is cut short or corrupt.
func (r *markReader) next() (shared int, suffix string, ok bool) {
	n, rest, ok := packed.Uvarint(r.rest)
	if !ok || n > uint64(r.tokenLen) {
		return 0, "", false
	}
	if suffix, rest, ok = packed.Next(rest); !ok {
		return 0, "", false
	}
	w, rest, ok := packed.Uvarint(rest)
	switch {
	case !ok || w&1 == 1 && (w != sameWhat || !r.read):
		return 0, "", false // no previous description to repeat, or no such field
	case w&1 == 0:
		if w>>1 > uint64(len(rest)) {
			return 0, "", false
		}
		r.what, rest = rest[:w>>1], rest[w>>1:]
	}
	r.rest, r.read, r.tokenLen = rest, true, int(n)+len(suffix)
	return int(n), suffix, true
}

// eachMark calls f with the token and description of every mark, in the
// order of their tokens, until f returns false.
func (c *claims) eachMark(f func(token, what string) bool) {
	r := markReader{rest: c.marks}
	var token []byte
	for {
		shared, suffix, ok := r.next()
		if !ok {
			return
		}
		token = append(token[:shared], suffix...)
		if !f(string(token), r.what) {
			return
		}
	}
}

// what returns the description of token among the marks. It runs for every
// peer and entry of a join, so it matches token against the front-coded
// entries as they come, without rebuilding theirs.
func (c *claims) what(token string) (what string, found bool) {
	r := markReader{rest: c.marks}
	m := 0 // length of the prefix token shares with the last token read
	for {
		shared, suffix, ok := r.next()
		switch {
		case !ok:
			return "", false
		case shared < m:
			// It differs from the last token where token does not, so it
			// sorts after token, and so do the rest.
			return "", false
		case shared > m:
			continue // it differs from token where the last token did
		}
		k := commonPrefix(suffix, token[m:])
		m += k
		if k == len(suffix) {
			if m == len(token) {
				return r.what, true
			}
		} else if m == len(token) || suffix[k] > token[m] {
			return "", false // past token
		}
	}
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
	if f, ok := pod.Facts.(*Facts); ok && f.policy == p &&
		((asPeer && f.claims.marked) || (!asPeer && f.claims.avoiding)) {
		return &f.claims, nil
	}
	view := &p.asPending // the view it is needed in, cheaper than all
	if asPeer {
		view = &p.asPeer
	}
	_, facts, err := p.describe(ctx, view, pod)
	if err != nil {
		return nil, err
	}
	if f, ok := facts.(*Facts); ok && (f.claims.marked || f.claims.avoiding) {
		return &f.claims, nil
	}
	return nil, nil
}

// join applies the pending pod's separate (when conflicts is set) and
// spread (when penalties is set) entries to every bound peer whose marks
// hold their mark, as data.regosched.join of the default policy does in Rego.
func (p *Policy) join(ctx context.Context, in *Input, conflicts *[]Conflict, penalties *[]Penalty) error {
	mine, err := p.claimsOf(ctx, in.Pod, false)
	if err != nil || mine == nil || mine.avoids == nil {
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
			for _, s := range mine.avoids.separate {
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
			for _, s := range mine.avoids.spread {
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
