package judge

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// DescribeStand describes a bound pod as the pending pod it once was
// (what it avoids), as filter described it: the audit and the repair ask
// whether it breaks a rule where it stands.
func DescribeStand(ctx context.Context, pol *policy.Policy, pod *model.Pod) ([]string, *model.Claims, error) {
	self := *pod // ours to change: cached pods are shared and immutable
	self.Node, self.Claims = "", nil
	keys, c, err := pol.DescribePending(ctx, &self)
	if err != nil {
		return nil, nil, fmt.Errorf("describing %s: %w", pod.Key(), err)
	}
	return keys, c, nil
}

// Stand is the stand phase: it judges the bound pod where it stands, with keys and c from
// DescribeStand, among its peers as view holds them, those in changed
// replaced (their roles after a failover, say). It returns the conflicts
// of the pod's own node (on it, or in its zone), in the policy's order,
// and the peers judged.
func Stand(ctx context.Context, pol *policy.Policy, view PeerView, pod *model.Pod, keys []string, c *model.Claims,
	changed map[types.UID]*model.Pod) ([]model.Conflict, []*model.Pod, error) {
	if len(keys) == 0 {
		return nil, nil, nil
	}
	self := *pod
	self.Node, self.Claims = "", c
	peers := view.Peers(keys, pod.UID)
	if len(changed) > 0 {
		peers = slices.Clone(peers)
		for i, q := range peers {
			if h, ok := changed[q.UID]; ok {
				peers[i] = h
			}
		}
	}
	if len(peers) == 0 {
		return nil, nil, nil
	}
	conflicts, err := pol.Conflicts(ctx, policy.NewInput(&self, peers, view))
	if err != nil {
		return nil, nil, fmt.Errorf("judging %s: %w", pod.Key(), err)
	}
	var here []model.Conflict
	labels, _ := view.NodeLabels(pod.Node)
	for _, c := range conflicts {
		if c.Domain.Holds(pod.Node, labels) {
			here = append(here, c)
		}
	}
	return here, peers, nil
}
