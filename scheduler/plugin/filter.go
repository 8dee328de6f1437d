package plugin

import (
	"context"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Filter turns a node away when the pending pod would break a hard rule
// there. The node is Unschedulable when every peer it conflicts with there
// has a lower priority than the pod, so that default preemption may evict
// them (its dry run removes them through RemovePod); otherwise it is
// UnschedulableAndUnresolvable, and preemption leaves the node alone.
func (pl *Regosched) Filter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "regosched: node not found")
	}
	var reasons []string
	resolvable := true
	for _, c := range s.conflicts[node.Name] {
		if s.removed[c.Peer] {
			continue
		}
		reasons = append(reasons, c.Reason)
		if p, ok := s.peers[c.Peer]; !ok || p.Priority >= s.pod.Priority {
			resolvable = false
		}
	}
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
	slices.Sort(reasons)
	reasons = slices.Compact(reasons)
	pl.log.WithFields(logrus.Fields{
		"pod": s.pod.Key(), "node": node.Name, "reason": strings.Join(reasons, "; "),
		"resolvable": resolvable, "policyRevision": pl.policy.Revision(),
	}).Debug("denied")
	code := fwk.UnschedulableAndUnresolvable
	if resolvable {
		code = fwk.Unschedulable
	}
	return fwk.NewStatus(code, reasons...)
}
