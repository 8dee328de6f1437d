package judge

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// AsPeer is obj on node as s's policy reads a peer: described (its marks)
// and kept only when it shares a group with s (ok); a pod in none of s's
// groups can break none of its rules. Every front end that meets a pod
// the placements do not hold as a peer asks here: a relabelled peer read
// again (Refresh), a nominated pod in a preemption dry run (Nominated),
// a pod in its role after a failover (the repair).
func AsPeer(ctx context.Context, s *Subject, obj *model.Pod) (peer *model.Pod, ok bool, err error) {
	keys, c, err := s.Policy.DescribePeer(ctx, obj)
	if err != nil {
		return nil, false, fmt.Errorf("describing %s as a peer: %w", obj.Key(), err)
	}
	if !SharesGroup(keys, s.Keys) {
		return nil, false, nil
	}
	q := *obj
	q.Claims = c
	return &q, true, nil
}

// SharesGroup reports whether two pods with these groups are peers.
func SharesGroup(a, b []string) bool {
	return slices.ContainsFunc(a, func(k string) bool { return slices.Contains(b, k) })
}

// IsPeerChange reports whether the bound pod changed (old or new form,
// either nil) is or was in one of pod's groups under pol: only a peer can
// have kept pod off a node, so only its change may free one.
func IsPeerChange(ctx context.Context, pol *policy.Policy, pod *v1.Pod, changed ...*v1.Pod) (bool, error) {
	keys, err := pol.PeerKeys(ctx, model.PodFromObject(pod))
	if err != nil || len(keys) == 0 {
		return false, err
	}
	for _, c := range changed {
		if c == nil {
			continue
		}
		theirs, err := pol.PeerKeys(ctx, model.PodFromObject(c))
		if err != nil {
			return false, err
		}
		if SharesGroup(theirs, keys) {
			return true, nil
		}
	}
	return false, nil
}
