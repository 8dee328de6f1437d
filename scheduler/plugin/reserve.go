package plugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/policy"
)

// Reserve records the pod on its node in the placement cache at once, as
// the scheduler's own cache assumes it: the next pod's PreFilter, which may
// run before this binding is seen, must count it among its peers. The
// informer's report of the binding replaces the record later.
func (pl *Regosched) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if len(s.keys) == 0 {
		return nil
	}
	placed := *s.pod
	placed.Node = nodeName
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	// Its peers read the pod's marks, which the pending description left out.
	if _, placed.Claims, err = pl.policy.DescribePeer(ctx, &placed); err != nil {
		return fwk.AsStatus(fmt.Errorf("regosched: pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	pl.cache.Assume(&placed, s.keys, nil)
	s.assumed = &placed
	return nil
}

// Unreserve takes back Reserve's record when the pod is not bound after all.
func (pl *Regosched) Unreserve(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ string) {
	s, err := getState(cs)
	if err != nil || s.assumed == nil {
		return
	}
	pl.cache.Unassume(s.assumed)
	s.assumed = nil
}
