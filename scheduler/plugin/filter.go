package plugin

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// Filter turns a node away when the pending pod would break a hard rule
// there. The node is Unschedulable when the judge finds preemption can
// resolve it (every conflicting peer there of lower priority and not
// protected by the policy), so that default preemption may evict them (its
// dry run removes them through RemovePod); otherwise it is
// UnschedulableAndUnresolvable, and preemption leaves the node alone.
// PreFilter logged and counted the denials, once per node: Filter runs
// again for every node of every preemption dry run.
func (pl *Regosched) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.shadow != nil {
		if node := nodeInfo.Node(); node != nil {
			s.shadow.saw(node.Name)
		}
	}
	logged := s.log != nil && !s.clone
	if logged {
		if node := nodeInfo.Node(); node != nil {
			s.log.saw(node.Name)
		}
	}
	if !s.verdict.HasConflicts() && len(s.added) == 0 {
		return nil // most pods, on most nodes
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "regosched: node not found")
	}
	if logged {
		// The main state has nothing removed or added: the verdict's
		// conflicts are the node's.
		if cs := s.verdict.At(node.Name); len(cs) > 0 {
			s.log.deny(s.subject, cs)
		}
	}
	var reasons []string
	for _, c := range s.verdict.At(node.Name) {
		if !s.removed[c.Peer] {
			reasons = append(reasons, c.Reason)
		}
	}
	resolvable := s.verdict.Preemptible(node.Name, func(uid types.UID) bool { return s.removed[uid] })
	for _, cs := range s.added {
		for _, c := range cs {
			if c.Node == node.Name {
				// A nominated pod is not bound: there is nothing to evict.
				reasons = append(reasons, c.Reason)
				resolvable = false
			}
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	code := fwk.UnschedulableAndUnresolvable
	if resolvable {
		code = fwk.Unschedulable
	}
	slices.Sort(reasons)
	return fwk.NewStatus(code, slices.Compact(reasons)...)
}
