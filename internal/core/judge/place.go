package judge

import (
	"context"
	"errors"
	"fmt"

	"github.com/regosched/regosched/internal/core/model"
)

// ErrPolicyChanged says a new policy became active while a pod was being
// placed under the one before: recorded under the old policy, the pod
// could be missed by the new index, so it is judged again.
var ErrPolicyChanged = errors.New("the active policy changed while placing the pod")

// RefusedError is a placing refused by the recheck: the pod on its node
// would break the hard rules of Refusal.
type RefusedError struct {
	Pod string
	Refusal
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("placing %s on %s would break a rule: %s", e.Pod, e.Node, e.Reason())
}

// Place is the place phase: s's pod recorded on node in the placements
// before its binding is seen, as its peers will read it (on the node,
// with its marks), so that the next peer judged counts it. With recheck
// (the extender's bind, whose filter answer may be stale), the pod is
// first judged on node again against the placements as they are now,
// under the lock of its groups so that two peers placed at once are
// judged one after the other; a broken rule is a *RefusedError. The
// record is taken back by the placements' Unassume.
func (j *Judge) Place(ctx context.Context, s *Subject, node string, recheck bool) (*model.Pod, error) {
	placed := *s.Pod
	placed.Node = node
	if len(s.Keys) > 0 { // in no group, no peer ever reads its marks
		var err error
		if _, placed.Claims, err = s.Policy.DescribePeer(ctx, &placed); err != nil {
			return nil, fmt.Errorf("describing pod %s on node %s: %w", s.Pod.Key(), node, err)
		}
	}
	if recheck {
		unlock := j.locks.lock(s.Keys)
		defer unlock()
		j.FindPeers(s)
		v, err := j.conflicts(ctx, s)
		if err != nil {
			return nil, err
		}
		// Rules per zone are guarded too (a burst's peers are filtered
		// before each other's binding is seen), unless they yield now as
		// filter decides it: no node of the cluster takes the pod, so that
		// filter, asked again, would choose the same.
		here := v.At(node)
		if len(here) > 0 && perZoneAlone(here) && v.YieldZones(j.cfg.Placements.NodeNames(), nil) {
			j.Yielded(s, v, "bind")
			here = nil
		}
		if len(here) > 0 {
			// A refusal at this point is no preemption candidate: the
			// scheduler chose the node already.
			j.Denied(s, node, here, false, "bind")
			return nil, &RefusedError{Pod: s.Pod.Key(), Refusal: Refusal{Index: -1, Node: node, Conflicts: here}}
		}
	}
	if len(s.Keys) == 0 {
		return &placed, nil
	}
	if !j.cfg.Placements.Assume(&placed, s.Keys, func() bool { return j.cfg.Policies.Load() == s.Policy }) {
		return nil, ErrPolicyChanged
	}
	return &placed, nil
}
