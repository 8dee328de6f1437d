package judge

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Scores are the candidates' soft-rule scores as both front ends give
// them (judge.Score of each node's total penalty against the highest): the
// extender's prioritize, and the shadow rollout's comparison of score
// orders.
type Scores struct {
	totals  []float64
	highest float64
}

// ScoreNodes sums penalties on each of the candidates names, reading
// candidate i's labels with labels(i, name) only when a penalty is on a
// topology domain other than the node itself. totals is the caller's
// buffer of len(names) (nil allocates one), so a hot path can pool it; it
// is overwritten and Scores keeps it. ok is false when no candidate has a
// penalty: the pod then prefers no node, and every candidate would score
// the maximum.
func ScoreNodes(penalties []model.Penalty, names []string, labels func(i int, name string) map[string]string, totals []float64) (sc Scores, ok bool) {
	table, ok := NewTable(penalties)
	if !ok {
		return Scores{}, false
	}
	if totals == nil {
		totals = make([]float64, len(names))
	}
	totals = totals[:len(names)]
	needsLabels := table.NeedsLabels()
	var highest float64
	for i, name := range names {
		var l map[string]string
		if needsLabels {
			l = labels(i, name)
		}
		total := table.Total(name, l)
		totals[i] = total
		if total > highest { // not math.Max, whose NaN and ±0 cases cost more than the rest of the loop: weights are finite and non-negative (checked when read)
			highest = total
		}
	}
	if highest == 0 {
		return Scores{}, false
	}
	return Scores{totals: totals, highest: highest}, true
}

// Score is candidate i's score of 0..maxScore (Score).
func (s Scores) Score(i int, maxScore int64) int64 {
	return Score(s.totals[i], s.highest, maxScore)
}

// Penalties are the soft rules' penalties of the pending pod among its
// peers, for a front end that scores a pod it did not filter (another
// extender filtered it, or filter's hand-over expired); nil without peers.
func (j *Judge) Penalties(ctx context.Context, pol *policy.Policy, pod *v1.Pod) ([]model.Penalty, error) {
	s, err := j.Describe(ctx, pol, pod)
	if err != nil {
		return nil, err
	}
	j.FindPeers(s)
	v, err := Evaluate(ctx, s, j.cfg.Placements)
	if err != nil {
		return nil, err
	}
	return v.Penalties, nil
}

// Totals recycles per-candidate totals: thousands of candidates per
// request, on the hot path of filter (the soft tier) and prioritize. The
// zero value is ready.
type Totals struct {
	pool sync.Pool // of *[]float64
}

// Get returns n zeroed totals.
func (b *Totals) Get(n int) []float64 {
	if p, ok := b.pool.Get().(*[]float64); ok && cap(*p) >= n {
		t := (*p)[:n]
		clear(t)
		return t
	}
	return make([]float64, n)
}

// Put gives t back for a later Get.
func (b *Totals) Put(t []float64) { b.pool.Put(&t) }
