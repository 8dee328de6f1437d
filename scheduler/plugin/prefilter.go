package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
)

// stateKey is where PreFilter leaves its state in the CycleState.
const stateKey fwk.StateKey = "PreFilter" + Name

// state is what PreFilter works out once per scheduling cycle, for Filter,
// Score and Reserve, and what preemption's dry run edits through AddPod and
// RemovePod on its clones.
type state struct {
	// pod is the pending pod as the policy described it; keys its groups.
	pod  *placement.Pod
	keys []string
	// peers are the pod's bound or assumed peers at PreFilter, by UID.
	peers map[types.UID]*placement.Pod
	// conflicts are the hard rules' verdicts at PreFilter, by node, and
	// penalties the soft rules'; both read-only once built.
	conflicts map[string][]policy.Conflict
	penalties []policy.Penalty
	// removed are the peers that a preemption dry run took off their node.
	removed map[types.UID]bool
	// added are the conflicts with pods that a dry run put on a node and
	// that were no peer at PreFilter (nominated pods), by that pod's UID.
	added map[types.UID][]policy.Conflict
	// scores is the soft rules' penalties by topology key and value, built
	// by PreScore.
	scores map[string]map[string]float64
	// assumed is the pod as Reserve recorded it in the cache, for Unreserve.
	assumed *placement.Pod
}

// Clone copies what AddPod and RemovePod change; the rest is shared.
func (s *state) Clone() fwk.StateData {
	c := *s
	c.removed = maps.Clone(s.removed)
	c.added = maps.Clone(s.added)
	return &c
}

func getState(cs fwk.CycleState) (*state, error) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from the cycle state: %w", stateKey, err)
	}
	s, ok := d.(*state)
	if !ok {
		return nil, fmt.Errorf("%q in the cycle state is a %T", stateKey, d)
	}
	return s, nil
}

// PreFilter describes the pending pod, finds its peers in the placement
// cache and judges the hard and soft rules against them, once for every
// candidate node. A pod in no group skips Filter: no rule can concern it.
func (pl *Regosched) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !pl.cache.HasSynced() {
		return nil, fwk.NewStatus(fwk.Error, "regosched: the placement cache has not synced")
	}
	// A policy that runs away must not hold the scheduler's one cycle.
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	s, err := pl.judge(ctx, pod)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("regosched: pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	cs.Write(stateKey, s)
	if len(s.keys) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// judge builds the state of pod.
func (pl *Regosched) judge(ctx context.Context, pod *v1.Pod) (*state, error) {
	p := placement.PodFromObject(pod)
	p.Node = "" // a stale node name must not make the pending pod look placed
	keys, described, err := pl.policy.DescribePending(ctx, p)
	if err != nil {
		return nil, err
	}
	p.Claims = described
	s := &state{pod: p, keys: keys, removed: map[types.UID]bool{}, added: map[types.UID][]policy.Conflict{}}
	if len(keys) == 0 {
		return s, nil
	}
	peers := pl.cache.Peers(keys, p.UID)
	s.peers = make(map[types.UID]*placement.Pod, len(peers))
	for _, peer := range peers {
		s.peers[peer.UID] = peer
	}
	if len(peers) == 0 {
		return s, nil
	}
	conflicts, penalties, err := pl.policy.Judge(ctx, policy.NewInput(p, peers, pl.cache.NodeLabels))
	if err != nil {
		return nil, err
	}
	gone := pl.gonePeers(ctx, s, conflicts)
	s.conflicts = make(map[string][]policy.Conflict)
	for _, c := range conflicts {
		if !gone[c.Peer] {
			s.conflicts[c.Node] = append(s.conflicts[c.Node], c)
		}
	}
	for _, pen := range penalties {
		if !gone[pen.Peer] {
			s.penalties = append(s.penalties, pen)
		}
	}
	for uid := range gone {
		delete(s.peers, uid)
	}
	return s, nil
}

// maxChecks bounds the API reads of gonePeers per cycle.
const maxChecks = 32

// gonePeers returns the conflicting peers that the cache still holds but
// that are gone from the API server. Why: deleting a peer (a preemption
// victim, say) makes the scheduler retry the pods it blocked at once, from
// its own informer, often before the cache's informer has seen the
// deletion; deciding on the cache alone would then refuse the node again,
// and preemption would pick a second victim elsewhere. Only a peer absent
// from the scheduler's snapshot of its node is read from the API: the two
// views disagree, and the API server settles it.
func (pl *Regosched) gonePeers(ctx context.Context, s *state, conflicts []policy.Conflict) map[types.UID]bool {
	if pl.snapshot == nil {
		return nil
	}
	gone := map[types.UID]bool{}
	checked := map[types.UID]bool{}
	for _, c := range conflicts {
		if checked[c.Peer] || len(checked) >= maxChecks {
			continue
		}
		checked[c.Peer] = true
		peer, ok := s.peers[c.Peer]
		if !ok || pl.inSnapshot(peer) {
			continue
		}
		obj, err := pl.client.CoreV1().Pods(peer.Namespace).Get(ctx, peer.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone[c.Peer] = true
		case err != nil: // cannot tell: the cache's word stands
		case obj.UID != peer.UID || (obj.Spec.NodeName != "" && obj.Spec.NodeName != peer.Node) ||
			obj.Status.Phase == v1.PodSucceeded || obj.Status.Phase == v1.PodFailed:
			// Not bound yet is no sign of gone: a pod Reserve recorded is
			// bound only once its binding call returns.
			gone[c.Peer] = true
		}
	}
	if len(gone) > 0 {
		pl.log.WithFields(map[string]any{"pod": s.pod.Key(), "gone": len(gone)}).
			Debug("placement cache was behind the API; decided without the peers gone")
	}
	return gone
}

// inSnapshot reports whether the scheduler's snapshot has peer on its node.
func (pl *Regosched) inSnapshot(peer *placement.Pod) bool {
	ni, err := pl.snapshot.NodeInfos().Get(peer.Node)
	if err != nil || ni == nil {
		return false
	}
	for _, pi := range ni.GetPods() {
		if pi.GetPod().UID == peer.UID {
			return true
		}
	}
	return false
}

// PreFilterExtensions returns the plugin: preemption's dry run tells it
// which pods it takes off or puts on a node.
func (pl *Regosched) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// RemovePod takes a peer off its node for this cycle's clone of the state:
// the conflicts it caused there no longer count. This is what lets default
// preemption evict a lower-priority peer that breaks a rule.
func (pl *Regosched) RemovePod(_ context.Context, cs fwk.CycleState, _ *v1.Pod, info fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	uid := info.GetPod().UID
	if _, ok := s.peers[uid]; ok {
		s.removed[uid] = true
	}
	delete(s.added, uid)
	return nil
}

// AddPod puts a pod on a node for this cycle's clone of the state: a peer
// removed before counts again (a victim reprieved), and a pod that was no
// peer at PreFilter is judged now if it is in a group of the pending pod
// (a nominated pod, not bound yet, that the framework places on the node
// it was nominated for).
func (pl *Regosched) AddPod(ctx context.Context, cs fwk.CycleState, _ *v1.Pod, info fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	add := info.GetPod()
	if _, ok := s.peers[add.UID]; ok {
		delete(s.removed, add.UID)
		return nil
	}
	if add.Spec.NodeName != "" || add.UID == s.pod.UID {
		// A bound pod that was no peer at PreFilter is in none of the
		// pending pod's groups: the cache indexes every bound pod in one.
		return nil
	}
	node := nodeInfo.Node()
	if node == nil {
		return nil
	}
	peer := placement.PodFromObject(add)
	peer.Node = node.Name
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	keys, described, err := pl.policy.DescribePeer(ctx, peer)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("regosched: nominated pod %s/%s: %w", add.Namespace, add.Name, err))
	}
	if !slices.ContainsFunc(keys, func(k string) bool { return slices.Contains(s.keys, k) }) {
		return nil
	}
	peer.Claims = described
	in := &policy.Input{Pod: s.pod, Peers: []*placement.Pod{peer}, Nodes: map[string]map[string]string{node.Name: node.Labels}}
	conflicts, err := pl.policy.Conflicts(ctx, in)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("regosched: nominated pod %s/%s: %w", add.Namespace, add.Name, err))
	}
	if len(conflicts) > 0 {
		s.added[add.UID] = conflicts
	}
	return nil
}
