package plugin

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
)

// assumeTTL is how long Reserve's record outlives a binding the informer
// never reports: the extender's default --inflight-ttl.
const assumeTTL = placement.DefaultInFlightTTL

// Reserve records the pod on its node in the placement cache at once, as
// the scheduler's own cache assumes it: the next pod's PreFilter, which may
// run before this binding is seen, must count it among its peers. The
// informer's report of the binding replaces the record later.
func (pl *Regosched) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) (st *fwk.Status) {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	// One node fit, or PreScore offered already (shadow.go).
	s.shadow.offer(pl.shadow)
	if s.log != nil {
		pl.logFilter(s.log, func() ([]string, int) { return []string{nodeName}, 1 })
		s.log.reserved = time.Now()
		defer func() {
			if !st.IsSuccess() {
				pl.logBind(s.log, pod, nodeName, st.AsError())
			}
		}()
	}
	if len(s.subject.Keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	// No recheck: the scheduler's cycle is serial, and this pod's
	// PreFilter counted every peer placed before it.
	placed, err := pl.judge.Place(ctx, s.subject, nodeName, false)
	if err != nil {
		// A changed policy (judge.ErrPolicyChanged) included: the scheduler
		// tries the pod again under the new one.
		return fwk.AsStatus(fmt.Errorf("regosched: %w", err))
	}
	s.assumed = placed
	return nil
}

// Unreserve takes back Reserve's record when the pod is not bound after all.
func (pl *Regosched) Unreserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	s, err := getState(cs)
	if err != nil {
		return
	}
	pl.logBind(s.log, pod, nodeName, errNotBound)
	if s.assumed == nil {
		return
	}
	pl.cache.Unassume(s.assumed)
	s.assumed = nil
}

// PostBind starts assumeTTL on Reserve's record once the binding is made,
// as the extender's bind does for a binding it cannot confirm: a report the
// informer never delivers must not leave a phantom peer forever, and a
// binding still on its way (a Permit wait, a throttled API call) must not
// lose its record. It also gives the decision log's bind event.
func (pl *Regosched) PostBind(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	s, err := getState(cs)
	if err != nil {
		return
	}
	if s.assumed != nil {
		pl.cache.ExpireAssumed(s.assumed, assumeTTL)
	}
	if pl.decisionLog != nil {
		pl.logBind(s.log, pod, nodeName, nil)
	}
}
