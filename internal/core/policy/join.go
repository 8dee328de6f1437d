package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/core/model"
)

// podPlaceholder in a mark's description is replaced by the peer's
// namespace/name.
const podPlaceholder = "{pod}"

// SumByDomain sums penalties per topology key and value: what a node in
// that domain is penalised, before the other keys' domains it is also in.
func SumByDomain(penalties []model.Penalty) map[string]map[string]float64 {
	byKey := map[string]map[string]float64{}
	for _, p := range penalties {
		if byKey[p.TopologyKey] == nil {
			byKey[p.TopologyKey] = map[string]float64{}
		}
		byKey[p.TopologyKey][p.Value] += p.Weight
	}
	return byKey
}

// Join gives the hard and the soft rules that hold between the pending pod
// and its peers: its separate and spread joined with their marks. Both come
// sorted and without duplicates.
func (p *Policy) Join(ctx context.Context, in *Input) ([]model.Conflict, []model.Penalty, error) {
	return p.joinClaims(ctx, in, true)
}

// Conflicts is Join's hard rules alone.
func (p *Policy) Conflicts(ctx context.Context, in *Input) ([]model.Conflict, error) {
	conflicts, _, err := p.joinClaims(ctx, in, false)
	return conflicts, err
}

// joinClaims applies the pending pod's separate entries (and, with soft, its
// spread entries) to every bound peer whose marks hold their mark.
func (p *Policy) joinClaims(ctx context.Context, in *Input, soft bool) ([]model.Conflict, []model.Penalty, error) {
	mine, err := p.claimsOf(ctx, in.Pod, model.AvoidsPart)
	if err != nil || mine == nil || !mine.Avoids() {
		return nil, nil, err
	}
	var cs []model.Conflict
	var ps []model.Penalty
	holders := make([][]holder, len(mine.Caps()))
	for _, peer := range in.Peers {
		if peer.Node == "" || peer.UID == in.Pod.UID {
			continue
		}
		theirs, err := p.claimsOf(ctx, peer, model.MarksPart)
		if err != nil {
			return nil, nil, fmt.Errorf("claims of peer %s: %w", peer.Key(), err)
		}
		if theirs == nil {
			continue
		}
		for i, c := range mine.Caps() {
			if what, ok := theirs.What(c.Mark); ok {
				holders[i] = append(holders[i], holder{peer, what})
			}
		}
		for _, s := range mine.Separate() {
			what, ok := theirs.What(s.Mark)
			if !ok {
				continue
			}
			d, ok := in.domainOf(peer.Node, s.TopologyKey)
			if !ok || !in.apart(s.TopologyKey) {
				continue // reported by the audit, never refused for
			}
			cs = append(cs, model.Conflict{
				Node:   peer.Node,
				Domain: d,
				Rule:   s.Rule,
				Reason: reason(what, peer.Key(), d),
				Peer:   peer.UID,
			})
		}
		if !soft {
			continue
		}
		for _, s := range mine.Spread() {
			if _, ok := theirs.What(s.Mark); !ok {
				continue
			}
			d, ok := in.domainOf(peer.Node, s.TopologyKey)
			if !ok {
				continue // a node without the label is in no domain
			}
			ps = append(ps, model.Penalty{TopologyKey: s.TopologyKey, Value: d.Value, Weight: s.Weight, Rule: s.Rule, Peer: peer.UID})
		}
	}
	for i, c := range mine.Caps() {
		cs = in.capConflicts(cs, c, holders[i])
	}
	return canonicalConflicts(cs), canonicalPenalties(ps), nil
}

// domainOf is the domain of key that node is in; none where the node lacks
// the key's label (or is unknown).
func (in *Input) domainOf(node, key string) (model.Domain, bool) {
	if key == model.HostnameKey {
		return model.Domain{Key: key, Value: node}, true
	}
	v, ok := in.Nodes[node][key]
	return model.Domain{Key: key, Value: v}, ok
}

// apart reports whether pods can be kept apart per domain of key at all:
// with one domain (a cluster in one zone) a rule per zone would refuse
// every node, and a pod would wait forever for a zone that does not
// exist; the audit reports such pods instead (ZonesUnavailable).
func (in *Input) apart(key string) bool {
	return key == model.HostnameKey || in.Domains == nil || in.Domains(key) >= 2
}

// reason is a mark's description for peer, in domain d: for a rule per
// domain, "on this node" becomes "in zone a" (the key's last word, then
// the value).
func reason(what, peer string, d model.Domain) string {
	what = strings.Replace(what, podPlaceholder, peer, 1)
	if d.OnNode() {
		return what
	}
	return strings.Replace(what, "on this node", "in "+model.KeyWord(d.Key)+" "+d.Value, 1)
}

// claimsOf returns the claims of pod under p with parts: those Describe kept
// with it, else (a pod re-read from the API, described under another policy,
// or for the other role) evaluated now.
func (p *Policy) claimsOf(ctx context.Context, pod *model.Pod, parts model.Parts) (*model.Claims, error) {
	if c := pod.Claims; c != nil && c.Origin() == p.origin && c.Has(parts) {
		return c, nil
	}
	view := &p.asPending // the view it is needed in, cheaper than all
	if parts == model.MarksPart {
		view = &p.asPeer
	}
	_, c, err := p.describe(ctx, view, pod)
	return c, err
}

// canonicalConflicts orders conflicts by node, peer, reason, rule and drops
// duplicates, as a Rego set of them would.
func canonicalConflicts(cs []model.Conflict) []model.Conflict {
	slices.SortFunc(cs, func(a, b model.Conflict) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Peer, b.Peer),
			cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Rule, b.Rule))
	})
	return slices.Compact(cs)
}

// canonicalPenalties orders penalties by peer, rule, topology key, value,
// weight and drops duplicates, as a Rego set of them would.
func canonicalPenalties(ps []model.Penalty) []model.Penalty {
	slices.SortFunc(ps, func(a, b model.Penalty) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.TopologyKey, b.TopologyKey), cmp.Compare(a.Value, b.Value), cmp.Compare(a.Weight, b.Weight))
	})
	return slices.Compact(ps)
}

// readClaims reads the parts of the claims rule evaluated for a pod (nil:
// undefined for it):
//
//	marks: {token: description}
//	separate: [{mark, rule, topology_key}]
//	spread: [{mark, rule, topology_key, weight}]
//	cap: [{mark, rule, topology_key, max | quorum, size}] (readCaps)
//
// where separate and spread are arrays or sets and every field but weight
// (default 1) and separate's topology_key (default kubernetes.io/hostname)
// is required.
func readClaims(origin *model.Origin, parts model.Parts, marks, separate, spread, caps *ast.Term) (*model.Claims, error) {
	var ms []model.Mark
	if marks != nil {
		obj, ok := marks.Value.(ast.Object)
		if !ok {
			return nil, fmt.Errorf("%s: marks %v is not an object", ClaimsRule, marks)
		}
		ms = make([]model.Mark, 0, obj.Len())
		err := obj.Iter(func(k, v *ast.Term) error {
			token, ok1 := k.Value.(ast.String)
			what, ok2 := v.Value.(ast.String)
			if !ok1 || !ok2 {
				return fmt.Errorf("%s: mark %v: %v is not a string to a string", ClaimsRule, k, v)
			}
			ms = append(ms, model.Mark{Token: string(token), What: string(what)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sep, err := readAvoids(separate, "separate", false)
	if err != nil {
		return nil, err
	}
	spr, err := readAvoids(spread, "spread", true)
	if err != nil {
		return nil, err
	}
	cp, err := readCaps(caps)
	if err != nil {
		return nil, err
	}
	return model.NewClaims(origin, parts, ms, sep, spr, cp), nil
}

func readAvoids(t *ast.Term, field string, soft bool) ([]model.Avoid, error) {
	if t == nil {
		return nil, nil
	}
	var out []model.Avoid
	err := forEachObject(t.Value, ClaimsRule+" "+field, func(t *ast.Term, o ast.Object) error {
		a := model.Avoid{Mark: str(o, "mark"), Rule: str(o, "rule")}
		if a.Mark == "" || a.Rule == "" {
			return fmt.Errorf("%s %s: %v needs a string mark and rule", ClaimsRule, field, t)
		}
		if a.TopologyKey = str(o, "topology_key"); a.TopologyKey == "" {
			if soft {
				return fmt.Errorf("%s %s: %v has no topology_key", ClaimsRule, field, t)
			}
			a.TopologyKey = model.HostnameKey // a hard rule is per node unless it says
		}
		if !soft {
			out = append(out, a)
			return nil
		}
		a.Weight = 1
		if w := o.Get(ast.StringTerm("weight")); w != nil {
			n, _ := w.Value.(ast.Number)
			f, ok := n.Float64()
			if !ok || f < 0 {
				return fmt.Errorf("%s %s: weight of %v is not a non-negative number", ClaimsRule, field, t)
			}
			a.Weight = f
		}
		out = append(out, a)
		return nil
	})
	return out, err
}

// smokeTest evaluates every entry point once on a pod and a peer that share
// all labels, so that runtime errors of a new policy surface at load time.
// Each is cut short after DescribeTimeout, so that a policy that loops is
// refused rather than hanging a reload.
func (p *Policy) smokeTest(ctx context.Context) error {
	labels := model.NewLabels(map[string]string{"app.kubernetes.io/name": "sample", "app.kubernetes.io/instance": "sample"})
	pod := &model.Pod{Namespace: "default", Name: "sample-0", UID: "sample-0", Labels: labels}
	peer := &model.Pod{Namespace: "default", Name: "sample-1", UID: "sample-1", Labels: labels, Node: "node-0"}
	in := &Input{Pod: pod, Peers: []*model.Pod{peer}, Nodes: map[string]map[string]string{"node-0": {}}}
	steps := []func(context.Context) error{
		func(ctx context.Context) (err error) { _, pod.Claims, err = p.Describe(ctx, pod); return err },
		func(ctx context.Context) (err error) { _, peer.Claims, err = p.Describe(ctx, peer); return err },
		func(ctx context.Context) (err error) { _, _, err = p.Join(ctx, in); return err },
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
