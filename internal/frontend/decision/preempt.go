package decision

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
)

// Preempt narrows the scheduler's preemption candidates. A node stays only
// when evicting its victims, plus the conflicting peers on it, resolves every
// hard-rule conflict: the conflicting peers are added to the victims (the
// scheduler's own dry run does not know our rules and would keep them), and
// a node is dropped when a needed eviction is of a pod of equal or higher
// priority, or when any victim is protected by the policy (e.g. a Redis
// master). The answer is always NodeNameToMetaVictims, as the scheduler
// expects from every extender.
func (d *Decider) Preempt(ctx context.Context, args *extenderv1.ExtenderPreemptionArgs) (*extenderv1.ExtenderPreemptionResult, error) {
	var start time.Time
	if d.opts.DecisionLog != nil {
		start = time.Now()
	}
	ctx, cancel := d.evalContext(ctx)
	defer cancel()
	res, s, err := d.preempt(ctx, args)
	err = d.evalError(ctx, args.Pod, err)
	if d.opts.DecisionLog != nil {
		d.logPreempt(start, args, s, res, err)
	}
	return res, err
}

// preempt is Preempt over the core's victims phase, with ctx bounding the
// policy's evaluations; it returns the subject too (nil if none was made),
// for the decision log.
func (d *Decider) preempt(ctx context.Context, args *extenderv1.ExtenderPreemptionArgs) (*extenderv1.ExtenderPreemptionResult, *judge.Subject, error) {
	cands := candidates(args)
	byNode := make(map[string][]types.UID, len(cands))
	for node, v := range cands {
		byNode[node] = v.uids
	}
	s, kept, err := d.judge.Victims(ctx, d.policies.Load(), args.Pod, byNode)
	if err != nil {
		return nil, s, err
	}
	result := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: make(map[string]*extenderv1.MetaVictims, len(kept))}
	for node, uids := range kept {
		mv := &extenderv1.MetaVictims{NumPDBViolations: cands[node].pdb}
		for _, uid := range uids {
			mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: string(uid)})
		}
		result.NodeNameToMetaVictims[node] = mv
	}
	return result, s, nil
}

type victimList struct {
	uids []types.UID
	pdb  int64
}

// candidates reads either form of the request: UIDs (node-cache-capable
// scheduler) or whole pods.
func candidates(args *extenderv1.ExtenderPreemptionArgs) map[string]victimList {
	out := map[string]victimList{}
	for node, mv := range args.NodeNameToMetaVictims {
		v := victimList{}
		if mv != nil {
			v.pdb = mv.NumPDBViolations
			for _, p := range mv.Pods {
				if p != nil {
					v.uids = append(v.uids, types.UID(p.UID))
				}
			}
		}
		out[node] = v
	}
	for node, vs := range args.NodeNameToVictims {
		v := victimList{}
		if vs != nil {
			v.pdb = vs.NumPDBViolations
			for _, p := range vs.Pods {
				if p != nil {
					v.uids = append(v.uids, p.UID)
				}
			}
		}
		out[node] = v
	}
	return out
}
