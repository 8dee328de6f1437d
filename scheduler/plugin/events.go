package plugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/policy"
)

// EventsToRegister lists what may make a pod that Filter turned away
// schedulable: a bound peer leaving or changing its labels (its role, after
// a failover), the pod's own labels changing, and a node arriving or
// changing its labels (its topology domain). The bound pods' events have a
// queueing hint: in a large cluster most pods deleted or relabelled are no
// peer of a pod regosched turned away, and requeueing it for them only
// repeats the cycle that refused it. Default preemption's events follow,
// since PreEnqueue holds a preemptor back on its behalf.
func (pl *Regosched) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete | fwk.UpdatePodLabel}, QueueingHintFn: pl.isPeerChange},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodLabel}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}},
	}
	if pl.preemption == nil {
		return events, nil
	}
	more, err := pl.preemption.dp.EventsToRegister(ctx)
	if err != nil {
		return nil, fmt.Errorf("default preemption's events: %w", err)
	}
	return append(events, more...), nil
}

// isPeerChange queues pod when the bound pod deleted or relabelled is, or
// was before the change, in one of pod's groups: only a peer can have kept
// pod off a node. Anything it cannot tell (no policy, an object of another
// type, a policy error) queues the pod: a wasted cycle is better than a pod
// left waiting.
func (pl *Regosched) isPeerChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	pol := pl.policies.Load()
	if pol == nil {
		return fwk.Queue, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), policy.DescribeTimeout)
	defer cancel()
	var changed []*v1.Pod
	for _, obj := range []any{oldObj, newObj} {
		if obj == nil {
			continue
		}
		p, ok := obj.(*v1.Pod)
		if !ok {
			return fwk.Queue, nil
		}
		changed = append(changed, p)
	}
	peer, err := judge.IsPeerChange(ctx, pol, pod, changed...)
	switch {
	case err != nil:
		return fwk.Queue, err
	case peer:
		logger.V(5).Info("a peer changed", "pod", klog.KObj(pod))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// SignPod refuses to sign: a pod's verdicts depend on where its peers are,
// so no two pods may share a scheduling result.
func (pl *Regosched) SignPod(context.Context, *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, fwk.NewStatus(fwk.Unschedulable, "regosched decides each pod against its peers")
}
