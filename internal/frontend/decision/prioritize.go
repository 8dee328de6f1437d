package decision

import (
	"context"
	"iter"
	"time"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Prioritize scores the candidates of args 0..MaxExtenderPriority: the node
// with the highest total penalty scores 0, a node with none scores the
// maximum. The scores come as a sequence of host and score in the
// candidates' order, without the nodes that score 0 (kube-scheduler scores a
// missing node 0); a pod with no peers gets none: no preference. The
// sequence reads args' candidates, and may be ranged over once.
//
// With a decision log, the event is given when the sequence has been
// ranged over (at once when there are no scores), with the scores of the
// candidates that score below the maximum.
func (d *Decider) Prioritize(ctx context.Context, args *extenderv1.ExtenderArgs) (iter.Seq2[string, int64], error) {
	var rec *scoreRecord
	if d.opts.DecisionLog != nil {
		rec = &scoreRecord{start: time.Now()}
	}
	penalties, pol, err := d.penalties(ctx, args)
	if err != nil {
		rec.log(d, args, pol, err)
		return nil, err
	}
	if len(penalties) == 0 {
		rec.log(d, args, pol, nil)
		return noScores, nil
	}
	names := candidateNames(args)
	totals := d.totals.Get(len(names))
	scores, ok := judge.ScoreNodes(penalties, names, func(i int, name string) map[string]string {
		return d.nodeLabels(args, i, name)
	}, totals)
	if !ok {
		d.totals.Put(totals)
		rec.log(d, args, pol, nil)
		return noScores, nil
	}
	return func(yield func(string, int64) bool) {
		if totals == nil {
			return // ranged over already
		}
		defer func() { d.totals.Put(totals); totals = nil; rec.log(d, args, pol, nil) }()
		for i, name := range names {
			score := scores.Score(i, extenderv1.MaxExtenderPriority)
			if rec != nil && score < extenderv1.MaxExtenderPriority {
				rec.add(name, score)
			}
			if score > 0 && !yield(name, score) {
				return
			}
		}
	}, nil
}

func noScores(func(string, int64) bool) {}

// PrioritizeList is Prioritize's scores as the extender's answer, in a list
// of their own; nil when no node scores.
func (d *Decider) PrioritizeList(ctx context.Context, args *extenderv1.ExtenderArgs) (extenderv1.HostPriorityList, error) {
	scores, err := d.Prioritize(ctx, args)
	if err != nil {
		return nil, err
	}
	var list extenderv1.HostPriorityList
	for host, score := range scores {
		list = append(list, extenderv1.HostPriority{Host: host, Score: score})
	}
	return list, nil
}

// penalties are those filter computed for this pod just before, or else
// (no filter call kept them: another extender filtered, or they expired)
// evaluated now.
func (d *Decider) penalties(ctx context.Context, args *extenderv1.ExtenderArgs) ([]model.Penalty, *policy.Policy, error) {
	pol := d.policies.Load()
	if pol == nil {
		return nil, nil, ErrNoPolicy
	}
	if p, ok := d.scores.take(args.Pod.UID, pol); ok {
		return p, pol, nil
	}
	ectx, cancel := d.evalContext(ctx)
	defer cancel()
	p, err := d.penaltiesNow(ectx, args)
	return p, pol, d.evalError(ectx, args.Pod, err)
}

// penaltiesNow evaluates the pod's penalties (no wait: filter, just
// before, waited for the same peers).
func (d *Decider) penaltiesNow(ctx context.Context, args *extenderv1.ExtenderArgs) ([]model.Penalty, error) {
	return d.judge.Penalties(ctx, d.policies.Load(), args.Pod)
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
