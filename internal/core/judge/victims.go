package judge

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/policy"
)

// Victims is the victims phase, for a scheduler that chose victims
// without knowing the rules (the extender's preempt): of its candidate
// nodes, each with the victims its own dry run picked, it keeps those
// where evicting them plus the pod's conflicting peers there resolves
// every hard rule and evicts no pod the policy protects. A kept node's
// victims are the scheduler's, then those peers.
func (j *Judge) Victims(ctx context.Context, pol *policy.Policy, pod *v1.Pod, candidates map[string][]types.UID) (*Subject, map[string][]types.UID, error) {
	s, err := j.Describe(ctx, pol, pod)
	if err != nil {
		return nil, nil, err
	}
	j.FindPeers(s)
	v, err := j.conflicts(ctx, s)
	if err != nil {
		return s, nil, err
	}
	if err := j.weighPreemption(ctx, v); err != nil {
		return s, nil, err
	}
	kept := make(map[string][]types.UID, len(candidates))
	for node, victims := range candidates {
		if !v.Preemptible(node, nil) {
			continue
		}
		uids := slices.Clone(victims)
		for _, c := range v.At(node) {
			if !slices.Contains(uids, c.Peer) {
				uids = append(uids, c.Peer)
			}
		}
		protected := false
		for _, uid := range uids {
			if protected, err = j.Protected(ctx, s, uid); err != nil {
				return s, nil, err
			}
			if protected {
				break
			}
		}
		if !protected {
			kept[node] = uids
		}
	}
	return s, kept, nil
}
