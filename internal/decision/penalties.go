package decision

import (
	"fmt"
	"math"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/judge"
	"github.com/regosched/regosched/internal/policy"
)

// total is the penalty of candidate i, named name, of args, by t.
func (d *Decider) total(t *judge.Table, args *extenderv1.ExtenderArgs, i int, name string) float64 {
	var labels map[string]string
	if t.NeedsLabels() {
		labels = d.nodeLabels(args, i, name)
	}
	return t.Total(name, labels)
}

// keepBestTier folds the soft rules into filter (Options.SoftInFilter): of
// the candidates kept (runs, as filter returns them) it keeps those with
// the lowest total penalty, and turns the others away as unresolvable
// (evicting pods is not what a soft rule asks for), their penalty in the
// reason. When every kept candidate has the same total, none is turned
// away. It returns the runs kept.
func (d *Decider) keepBestTier(args *extenderv1.ExtenderArgs, s *subject, penalties []policy.Penalty,
	result *extenderv1.ExtenderFilterResult, kept []int) []int {
	table, ok := judge.NewTable(penalties)
	if !ok || len(kept) == 0 {
		return kept
	}
	names := candidateNames(args)
	totals := d.totals.get(len(names))
	defer d.totals.put(totals)
	best, worst := math.Inf(1), 0.0
	for r := 0; r < len(kept); r += 2 {
		for i := kept[r]; i < kept[r+1]; i++ {
			t := d.total(&table, args, i, names[i])
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
	d.log.WithFields(map[string]any{"pod": s.Pod.Key(), "demoted": demoted, "penalty": best}).
		Debug("filter: soft rules kept the candidates of the lowest penalty")
	return compactRuns(out)
}
