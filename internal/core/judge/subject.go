package judge

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Subject is a pending pod with the policy that judges it, its groups and
// its peers.
type Subject struct {
	Policy *policy.Policy
	// Pod is the pending pod as described: no node, with its claims.
	Pod *model.Pod
	// OwnLabels are the labels the pod came with, before Recall.
	OwnLabels model.Labels
	// Keys are the pod's groups; with none, no rule can concern it.
	Keys []string
	// Peers are the bound or assumed pods that share a group with it.
	Peers []*model.Pod

	byUID map[types.UID]*model.Pod // built on first use by Peer, or by Index
	// mu guards protected, the memo of Protected, which a preemption dry
	// run asks from many goroutines.
	mu        sync.Mutex
	protected map[types.UID]bool
}

// Index builds the look-up of peers by UID now, for a subject that many
// goroutines read afterwards (a framework's parallel Filter calls).
func (s *Subject) Index() { s.Peer("") }

// Describe makes the subject of pod under pol: its labels (recalled where
// they are not its own), its groups and its claims, as described ahead
// when nothing they depend on has changed since, else evaluated now. It
// finds no peers: a front end may first wait for peers in flight.
func (j *Judge) Describe(ctx context.Context, pol *policy.Policy, pod *v1.Pod) (*Subject, error) {
	if pol == nil {
		return nil, ErrNoPolicy
	}
	s := &Subject{Policy: pol, Pod: model.PodFromObject(pod)}
	s.OwnLabels = s.Pod.Labels
	if j.cfg.Recall != nil {
		if labels, ok := j.cfg.Recall(ctx, pod); ok {
			s.Pod.Labels = labels
		}
	}
	// A stale node name in the request must not make the pending pod look
	// placed.
	s.Pod.Node = ""
	if j.cfg.Ahead != nil {
		if keys, c, ok := j.cfg.Ahead.Described(s.Pod, pol.Origin()); ok {
			j.describedAhead.Inc()
			s.Keys, s.Pod.Claims = keys, c
			return s, nil
		}
	}
	j.describedNow.Inc()
	keys, c, err := pol.DescribePending(ctx, s.Pod)
	if err != nil {
		return nil, fmt.Errorf("describing pod %s: %w", s.Pod.Key(), err)
	}
	s.Keys, s.Pod.Claims = keys, c
	return s, nil
}

// FindPeers fills s.Peers from the placements.
func (j *Judge) FindPeers(s *Subject) {
	s.byUID = nil
	if len(s.Keys) == 0 {
		s.Peers = nil
		return
	}
	s.Peers = j.cfg.Placements.Peers(s.Keys, s.Pod.UID)
}

// Peer returns the peer with uid, if s has one.
func (s *Subject) Peer(uid types.UID) (*model.Pod, bool) {
	if s.byUID == nil {
		s.byUID = make(map[types.UID]*model.Pod, len(s.Peers))
		for _, p := range s.Peers {
			s.byUID[p.UID] = p
		}
	}
	p, ok := s.byUID[uid]
	return p, ok
}

// SetPeers replaces s's peers, e.g. with the fresh ones Refresh read.
func (s *Subject) SetPeers(peers []*model.Pod) {
	s.Peers, s.byUID = peers, nil
}

// PeerName names the peer uid by namespace/name, or by its UID when s
// holds no such peer: every log and report names peers this way.
func (s *Subject) PeerName(uid types.UID) string {
	if p, ok := s.Peer(uid); ok {
		return p.Key()
	}
	return string(uid)
}
