package plugin

import (
	"context"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/core/judge"
)

// PreScore sums the soft rules' penalties by topology domain, or skips
// Score when there are none: the pod then has no preference.
func (pl *Regosched) PreScore(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	// The filtering is over: the shadow gets its candidates (shadow.go),
	// the decision log the filter event.
	s.shadow.offer(pl.shadow)
	if s.log != nil {
		pl.logFilter(s.log, nodeNames(nodes))
		s.log.scoring = time.Now()
	}
	table, ok := judge.NewTable(s.filtered.Penalties())
	if !ok {
		if s.log != nil {
			pl.logNoPreference(s.log, nodes)
		}
		return fwk.NewStatus(fwk.Skip)
	}
	s.table = table
	return nil
}

// Score is the node's total penalty (higher is worse until NormalizeScore
// turns it around). It travels to NormalizeScore exactly, as the bits of
// the float: penalties are finite and not negative, and such floats order
// as their bits do, so NormalizeScore scores with the very function the
// extender's prioritize uses (judge.Score) instead of rounding the
// penalties first.
func (pl *Regosched) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := getState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, nil
	}
	return int64(math.Float64bits(s.table.Total(node.Name, node.Labels))), nil
}

// ScoreExtensions returns the plugin, for NormalizeScore.
func (pl *Regosched) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps penalties to 0..MaxScore with judge.Score: the node
// of the highest penalty scores 0, a node with none the maximum.
func (pl *Regosched) NormalizeScore(_ context.Context, cs fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	var highest float64
	for _, s := range scores {
		highest = max(highest, math.Float64frombits(uint64(s.Score)))
	}
	if pl.decisionLog != nil {
		if c := cycleLogOf(cs); c != nil {
			pl.logScores(c, scores, highest) // before the penalties become scores
		}
	}
	for i := range scores {
		scores[i].Score = judge.Score(math.Float64frombits(uint64(scores[i].Score)), highest, fwk.MaxScore)
	}
	return nil
}
