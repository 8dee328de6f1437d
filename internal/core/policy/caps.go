package policy

import (
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/core/model"
)

// holder is a peer that holds a cap's mark, with its mark's description.
type holder struct {
	peer *model.Pod
	what string
}

// Limit is how many members of a group of size members, the pod counted,
// one domain may hold under c: c.Max, or for a quorum fewer than half.
func Limit(c model.Cap, size int) int {
	if c.Quorum {
		return (size - 1) / 2
	}
	return c.Max
}

// Feasible reports whether size members can be placed at all under c over
// domains domains: a cap no placement can meet (a quorum of three over
// two zones, any quorum of one or two) would leave pods pending forever,
// so it refuses nothing and the audit reports the group instead.
func Feasible(c model.Cap, size, domains int) bool {
	limit := Limit(c, size)
	return limit > 0 && domains*limit >= size
}

// GroupSize is the size of c's group whose members are known: the
// largest of what the policy states, the members counted, and, where c
// says so, the replicas of the StatefulSets that hold them (replicas,
// when set; each StatefulSet once).
func GroupSize(c model.Cap, members []*model.Pod, replicas func(namespace, name string) (int, bool)) int {
	size := max(c.Size, len(members))
	if replicas == nil || !c.SizeFromStatefulSets {
		return size
	}
	seen := map[string]bool{}
	sum := 0
	for _, m := range members {
		key := model.PodKey(m.Namespace, m.StatefulSet)
		if m.StatefulSet == "" || seen[key] {
			continue
		}
		seen[key] = true
		if n, ok := replicas(m.Namespace, m.StatefulSet); ok {
			sum += n
		}
	}
	return max(size, sum)
}

// capConflicts appends to cs the conflicts of c for a pending pod whose
// peers holding c's mark are holders: every domain that already holds
// as many of them as c allows, one conflict per holder there.
func (in *Input) capConflicts(cs []model.Conflict, c model.Cap, holders []holder) []model.Conflict {
	if len(holders) == 0 {
		return cs // no domain holds any
	}
	members := make([]*model.Pod, 0, len(holders)+1)
	members = append(members, in.Pod)
	for _, h := range holders {
		members = append(members, h.peer)
	}
	size := GroupSize(c, members, in.Replicas)
	limit := Limit(c, size)
	if limit <= 0 || in.Domains != nil && !Feasible(c, size, in.Domains(c.TopologyKey)) {
		return cs
	}
	byDomain := map[model.Domain][]holder{}
	for _, h := range holders {
		if d, ok := in.domainOf(h.peer.Node, c.TopologyKey); ok {
			byDomain[d] = append(byDomain[d], h)
		}
	}
	for d, here := range byDomain {
		if len(here) < limit {
			continue
		}
		for _, h := range here {
			cs = append(cs, model.Conflict{
				Node:   h.peer.Node,
				Domain: d,
				Rule:   c.Rule,
				Reason: fmt.Sprintf("%s: with this pod %d of %d there, %s", reason(h.what, h.peer.Key(), d), len(here)+1, size, capWords(c)),
				Peer:   h.peer.UID,
			})
		}
	}
	return cs
}

// capWords says what c allows, for a reason.
func capWords(c model.Cap) string {
	if c.Quorum {
		return "fewer than half may be"
	}
	return fmt.Sprintf("at most %d may be", c.Max)
}

// readCaps reads the cap part: [{mark, rule, topology_key, max | quorum,
// size, size_from_statefulsets}], an array or set, where mark, rule and
// topology_key are required, max is a positive integer unless quorum is
// true, size (optional) is the group's size as the policy knows it, and
// size_from_statefulsets (optional) counts the replicas of the members'
// StatefulSets.
func readCaps(t *ast.Term) ([]model.Cap, error) {
	if t == nil {
		return nil, nil
	}
	var out []model.Cap
	err := forEachObject(t.Value, ClaimsRule+" cap", func(t *ast.Term, o ast.Object) error {
		c := model.Cap{Mark: str(o, "mark"), Rule: str(o, "rule"), TopologyKey: str(o, "topology_key")}
		if c.Mark == "" || c.Rule == "" || c.TopologyKey == "" {
			return fmt.Errorf("%s cap: %v needs a string mark, rule and topology_key", ClaimsRule, t)
		}
		for _, f := range []struct {
			key string
			to  *bool
		}{{"quorum", &c.Quorum}, {"size_from_statefulsets", &c.SizeFromStatefulSets}} {
			if v := o.Get(ast.StringTerm(f.key)); v != nil {
				b, ok := v.Value.(ast.Boolean)
				if !ok {
					return fmt.Errorf("%s cap: %s of %v is not a boolean", ClaimsRule, f.key, t)
				}
				*f.to = bool(b)
			}
		}
		var err error
		if c.Max, err = intField(o, "max"); err != nil || (!c.Quorum && c.Max <= 0) {
			return fmt.Errorf("%s cap: %v needs quorum true or a positive integer max", ClaimsRule, t)
		}
		if c.Size, err = intField(o, "size"); err != nil || c.Size < 0 {
			return fmt.Errorf("%s cap: size of %v is not a non-negative integer", ClaimsRule, t)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// intField is o's integer field key, 0 when absent.
func intField(o ast.Object, key string) (int, error) {
	t := o.Get(ast.StringTerm(key))
	if t == nil {
		return 0, nil
	}
	n, ok := t.Value.(ast.Number)
	if !ok {
		return 0, fmt.Errorf("%s is not a number", key)
	}
	i, ok := n.Int()
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return 0, fmt.Errorf("%s is not an integer", key)
	}
	return i, nil
}
