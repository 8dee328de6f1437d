package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// EventsToRegister lists what may make a pod that Filter turned away
// schedulable: a bound peer leaving or changing its labels (its role, after
// a failover), the pod's own labels changing, and a node arriving or
// changing its labels (its topology domain).
func (pl *Regosched) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete | fwk.UpdatePodLabel}},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodLabel}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}},
	}, nil
}

// SignPod refuses to sign: a pod's verdicts depend on where its peers are,
// so no two pods may share a scheduling result.
func (pl *Regosched) SignPod(context.Context, *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, fwk.NewStatus(fwk.Unschedulable, "regosched decides each pod against its peers")
}
