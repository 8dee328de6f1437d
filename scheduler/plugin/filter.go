package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
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
	if !s.filtered.Refuses(&s.edits) {
		return nil // most pods, on most nodes
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "regosched: node not found")
	}
	r, refused := s.filtered.Decide(node.Name, &s.edits)
	if !refused {
		return nil
	}
	if logged {
		// The main state has no edits: the verdict's conflicts are the
		// node's.
		s.log.deny(s.subject, r.Conflicts)
	}
	code := fwk.UnschedulableAndUnresolvable
	if r.Resolvable {
		code = fwk.Unschedulable
	}
	return fwk.NewStatus(code, r.ReasonLines()...)
}
