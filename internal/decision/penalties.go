package decision

import (
	"fmt"
	"math"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/policy"
)

// penaltyTable sums a pending pod's soft-rule penalties per candidate node:
// on the node itself (the hostname key) and on each topology value of the
// node's labels.
type penaltyTable struct {
	onNodes fewNodes[float64] // the hostname key's penalties: a few nodes among the candidates
	// A slice, not a map, for the loop over candidates: ranging over a map
	// per candidate costs more than all the rest of that loop.
	keys []keyedPenalties
}

type keyedPenalties struct {
	key    string
	values map[string]float64
}

// newPenaltyTable sums penalties per topology key and value; ok is false
// when there are none.
func newPenaltyTable(penalties []policy.Penalty) (t penaltyTable, ok bool) {
	byKey := policy.SumByDomain(penalties)
	if len(byKey) == 0 {
		return t, false
	}
	for key, values := range byKey {
		if key == policy.HostnameKey {
			t.onNodes = newFewNodes(values)
			continue
		}
		t.keys = append(t.keys, keyedPenalties{key, values})
	}
	return t, true
}

// total is the penalty of candidate i, named name, of args.
func (t *penaltyTable) total(d *Decider, args *extenderv1.ExtenderArgs, i int, name string) float64 {
	// The node name is known even for nodes without labels.
	total, _ := t.onNodes.get(name)
	if len(t.keys) > 0 {
		labels := d.nodeLabels(args, i, name)
		for _, k := range t.keys {
			if v, ok := labels[k.key]; ok {
				total += k.values[v]
			}
		}
	}
	return total
}

// keepBestTier folds the soft rules into filter (Options.SoftInFilter): of
// the candidates kept (runs, as filter returns them) it keeps those with
// the lowest total penalty, and turns the others away as unresolvable
// (evicting pods is not what a soft rule asks for), their penalty in the
// reason. When every kept candidate has the same total, none is turned
// away. It returns the runs kept.
func (d *Decider) keepBestTier(args *extenderv1.ExtenderArgs, s *subject, penalties []policy.Penalty,
	result *extenderv1.ExtenderFilterResult, kept []int) []int {
	table, ok := newPenaltyTable(penalties)
	if !ok || len(kept) == 0 {
		return kept
	}
	names := candidateNames(args)
	totals := d.totals.get(len(names))
	defer d.totals.put(totals)
	best, worst := math.Inf(1), 0.0
	for r := 0; r < len(kept); r += 2 {
		for i := kept[r]; i < kept[r+1]; i++ {
			t := table.total(d, args, i, names[i])
			totals[i] = t
			best, worst = min(best, t), max(worst, t)
		}
	}
	if worst == best {
		return kept
	}
	if result.FailedAndUnresolvableNodes == nil {
		result.FailedAndUnresolvableNodes = extenderv1.FailedNodesMap{}
	}
	reasons := map[float64]string{} // one string per distinct total
	var out []int
	demoted := 0
	for r := 0; r < len(kept); r += 2 {
		start := kept[r]
		for i := kept[r]; i < kept[r+1]; i++ {
			t := totals[i]
			if t == best {
				continue
			}
			out = append(out, start, i)
			start = i + 1
			demoted++
			reason, ok := reasons[t]
			if !ok {
				reason = fmt.Sprintf("soft rules: penalty %g here, %g on the nodes kept", t, best)
				reasons[t] = reason
			}
			result.FailedAndUnresolvableNodes[names[i]] = reason
		}
		out = append(out, start, kept[r+1])
	}
	d.log.WithFields(map[string]any{"pod": s.pod.Key(), "demoted": demoted, "penalty": best}).
		Debug("filter: soft rules kept the candidates of the lowest penalty")
	return compactRuns(out)
}
