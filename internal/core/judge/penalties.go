package judge

import (
	"math"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Table sums a pending pod's soft-rule penalties per node: on the node
// itself (the hostname key, matched by the node's name whatever its labels
// say, as kube-scheduler's own topology spreading does) and on each
// topology domain the node's labels put it in. A node without a key's
// label is in none of that key's domains.
type Table struct {
	onNodes fewNodes[float64]
	// A slice, not a map, for the loop over candidates: ranging over a map
	// per candidate costs more than all the rest of that loop.
	keys []keyedPenalties
}

type keyedPenalties struct {
	key    string
	values map[string]float64
}

// NewTable sums penalties by domain; ok is false when there are none: the
// pod then prefers no node.
func NewTable(penalties []model.Penalty) (t Table, ok bool) {
	byKey := policy.SumByDomain(penalties)
	if len(byKey) == 0 {
		return t, false
	}
	for key, values := range byKey {
		if key == model.HostnameKey {
			t.onNodes = newFewNodes(values)
			continue
		}
		t.keys = append(t.keys, keyedPenalties{key, values})
	}
	return t, true
}

// NeedsLabels reports whether Total reads node labels at all: a table of
// hostname penalties alone never does.
func (t *Table) NeedsLabels() bool { return len(t.keys) > 0 }

// Total is the penalty of the node named name whose labels are labels
// (read only when NeedsLabels).
func (t *Table) Total(name string, labels map[string]string) float64 {
	total, _ := t.onNodes.get(name)
	for _, k := range t.keys {
		if v, ok := labels[k.key]; ok {
			total += k.values[v]
		}
	}
	return total
}

// Score turns a node's total penalty into a score of 0..maxScore, given
// the highest total among the candidates: the node of the highest penalty
// scores 0, a node with none maxScore, the rest in proportion, rounded
// half away from zero. With no penalty anywhere every node scores
// maxScore. Both front ends score with it: the extender with
// MaxExtenderPriority, the plugin with the framework's MaxScore.
func Score(total, highest float64, maxScore int64) int64 {
	if highest <= 0 {
		return maxScore
	}
	return int64(math.Round(float64(maxScore) * (highest - total) / highest))
}
