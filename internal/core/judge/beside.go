package judge

import (
	"context"
	"fmt"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Evaluate is the hard and soft rules' verdict for s, with the labels of
// its peers' nodes, and of the nodes asked about, read from c: the one evaluation behind
// the judge's phases, and behind a policy judged beside the active one (the
// shadow rollout), which reads no placements of its own. A subject
// without peers gets an empty verdict without evaluating anything.
func Evaluate(ctx context.Context, s *Subject, c policy.Cluster) (*Verdict, error) {
	v := &Verdict{Subject: s, cluster: c}
	if len(s.Peers) == 0 {
		return v, nil
	}
	conflicts, penalties, err := s.Policy.Join(ctx, policy.NewInput(s.Pod, s.Peers, c))
	if err != nil {
		return nil, fmt.Errorf("judging pod %s: %w", s.Pod.Key(), err)
	}
	v.Penalties = penalties
	v.setConflicts(conflicts)
	return v, nil
}

// Beside is the subject of pod under pol among peers, for judging pol
// beside the policy whose judgement found them, on what that judgement
// read and without reading the cluster again: pod as it was described
// there (labels recalled, no node) is described again under pol; the
// peers keep the claims their own policy gave them, which pol's
// evaluation replaces with its own (their origin is not pol's). A pod pol
// puts in no group has no peers: none of pol's rules can concern it.
func Beside(ctx context.Context, pol *policy.Policy, pod *model.Pod, peers []*model.Pod) (*Subject, error) {
	if pol == nil {
		return nil, ErrNoPolicy
	}
	self := *pod // ours to change: the other judgement's pod is shared
	self.Node = ""
	s := &Subject{Policy: pol, Pod: &self, OwnLabels: pod.Labels}
	keys, c, err := pol.DescribePending(ctx, &self)
	if err != nil {
		return nil, fmt.Errorf("describing pod %s: %w", pod.Key(), err)
	}
	s.Keys, self.Claims = keys, c
	if len(keys) > 0 {
		s.Peers = peers
	}
	return s, nil
}
