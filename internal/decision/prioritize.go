package decision

import (
	"context"
	"math"
	"sync"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/policy"
)

// Prioritize scores candidates 0..MaxExtenderPriority: the node with the
// highest total penalty scores 0, a node with none scores the maximum.
// Nodes that score 0 are left out of the answer (kube-scheduler scores a
// missing node 0), and a pod with no peers gets an empty list: no preference.
// The list is nil when no node scores; the HTTP handler writes it as [].
func (d *Decider) Prioritize(ctx context.Context, args *extenderv1.ExtenderArgs) (extenderv1.HostPriorityList, error) {
	penalties, err := d.penalties(ctx, args)
	if err != nil {
		return nil, err
	}
	table, ok := newPenaltyTable(penalties)
	if !ok {
		return nil, nil
	}
	names := candidateNames(args)
	totals := d.totals.get(len(names))
	defer d.totals.put(totals)
	var highest float64
	for i, name := range names {
		total := table.total(d, args, i, name)
		totals[i] = total
		if total > highest { // not math.Max, whose NaN and ±0 cases cost more than the rest of the loop: weights are finite and non-negative (checked when read)
			highest = total
		}
	}
	if highest == 0 {
		return nil, nil
	}
	out := make(extenderv1.HostPriorityList, 0, len(names))
	for i, name := range names {
		score := int64(math.Round(float64(extenderv1.MaxExtenderPriority) * (highest - totals[i]) / highest))
		if score > 0 {
			out = append(out, extenderv1.HostPriority{Host: name, Score: score})
		}
	}
	return out, nil
}

// penalties are those filter computed for this pod just before, or else
// (no filter call kept them: another extender filtered, or they expired)
// evaluated now.
func (d *Decider) penalties(ctx context.Context, args *extenderv1.ExtenderArgs) ([]policy.Penalty, error) {
	pol := d.policies.Load()
	if pol == nil {
		return nil, ErrNoPolicy
	}
	if p, ok := d.scores.take(args.Pod.UID, pol); ok {
		return p, nil
	}
	// No wait: filter, just before, waited for the same peers.
	s, err := d.lookup(ctx, args.Pod, false)
	if err != nil || len(s.peers) == 0 {
		return nil, err
	}
	_, penalties, err := s.policy.Judge(ctx, d.input(s))
	return penalties, err
}

// nodeLabels reads candidate i's labels from the request when it carries
// full nodes, else from the cache.
func (d *Decider) nodeLabels(args *extenderv1.ExtenderArgs, i int, name string) map[string]string {
	if args.NodeNames == nil && args.Nodes != nil {
		return args.Nodes.Items[i].Labels
	}
	labels, _ := d.placements.NodeLabels(name)
	if labels == nil {
		// Empty, not nil: look the node up once per request only.
		labels = map[string]string{}
	}
	return labels
}

// totalsBuffers recycles the per-candidate totals of Prioritize.
type totalsBuffers struct {
	pool sync.Pool // of *[]float64
}

// get returns n zeroed totals.
func (b *totalsBuffers) get(n int) []float64 {
	if p, ok := b.pool.Get().(*[]float64); ok && cap(*p) >= n {
		t := (*p)[:n]
		clear(t)
		return t
	}
	return make([]float64, n)
}

func (b *totalsBuffers) put(t []float64) { b.pool.Put(&t) }
