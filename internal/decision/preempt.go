package decision

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
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
	ctx, cancel := d.evalContext(ctx)
	defer cancel()
	res, err := d.preempt(ctx, args)
	return res, d.evalError(ctx, args.Pod, err)
}

// preempt is Preempt, with ctx bounding the policy's evaluations.
func (d *Decider) preempt(ctx context.Context, args *extenderv1.ExtenderPreemptionArgs) (*extenderv1.ExtenderPreemptionResult, error) {
	s, err := d.lookup(ctx, args.Pod, false)
	if err != nil {
		return nil, err
	}
	needed := map[string][]types.UID{} // node -> conflicting peers
	if len(s.peers) > 0 {
		conflicts, err := s.policy.Conflicts(ctx, d.input(s))
		if err != nil {
			return nil, err
		}
		for _, c := range conflicts {
			needed[c.Node] = append(needed[c.Node], c.Peer)
		}
	}
	result := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
	protected := map[types.UID]bool{} // memo: a victim may be on several candidates' lists
	for node, victims := range candidates(args) {
		uids := slices.Clone(victims.uids)
		ok := true
		for _, uid := range needed[node] {
			if !s.evictable(uid) {
				ok = false
				break
			}
			if !slices.Contains(uids, uid) {
				uids = append(uids, uid)
			}
		}
		if !ok {
			continue
		}
		for _, uid := range uids {
			p, err := d.isProtected(ctx, s, uid, protected)
			if err != nil {
				return nil, err
			}
			if p {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		mv := &extenderv1.MetaVictims{NumPDBViolations: victims.pdb}
		for _, uid := range uids {
			mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: string(uid)})
		}
		result.NodeNameToMetaVictims[node] = mv
	}
	return result, nil
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

// isProtected asks the policy whether a victim must not be evicted. Only
// pods in the cache (members of a group) can be protected: the policy knows
// nothing of the others.
func (d *Decider) isProtected(ctx context.Context, s *subject, uid types.UID, memo map[types.UID]bool) (bool, error) {
	if v, ok := memo[uid]; ok {
		return v, nil
	}
	pod, ok := s.peer(uid)
	if !ok {
		if pod, ok = d.placements.PodByUID(uid); !ok {
			memo[uid] = false
			return false, nil
		}
	}
	v, err := s.policy.Protected(ctx, pod)
	if err != nil {
		return false, err
	}
	memo[uid] = v
	return v, nil
}
