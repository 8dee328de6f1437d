package plugin

import (
	"context"
	"math"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/policy"
)

// scoreScale keeps three decimals of a penalty in Score's integer.
const scoreScale = 1000

// PreScore sums the soft rules' penalties by topology domain, or skips
// Score when there are none: the pod then has no preference.
func (pl *Regosched) PreScore(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if len(s.penalties) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	s.scores = policy.SumByDomain(s.penalties)
	return nil
}

// Score is the node's total penalty (higher is worse until NormalizeScore
// turns it around): on the node itself, by name, and on each topology
// domain the node is in, by its labels.
func (pl *Regosched) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := getState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, nil
	}
	var total float64
	for key, values := range s.scores {
		value := node.Name
		if key != policy.HostnameKey {
			var ok bool
			if value, ok = node.Labels[key]; !ok {
				continue // a node without the label is in no domain
			}
		}
		total += values[value]
	}
	// Capped where float64 still counts in units, far below int64's limit:
	// weights are finite, not bounded.
	return int64(math.Round(min(total*scoreScale, 1<<53))), nil
}

// ScoreExtensions returns the plugin, for NormalizeScore.
func (pl *Regosched) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps penalties to 0..MaxScore: the node of the highest
// penalty scores 0, a node with none the maximum, as the extender's
// prioritize does.
func (pl *Regosched) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	var highest int64
	for _, s := range scores {
		highest = max(highest, s.Score)
	}
	for i := range scores {
		if highest == 0 {
			scores[i].Score = fwk.MaxScore
			continue
		}
		scores[i].Score = int64(math.Round(float64(fwk.MaxScore) * float64(highest-scores[i].Score) / float64(highest)))
	}
	return nil
}
