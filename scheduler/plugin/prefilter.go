package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/judge"
	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
)

// stateKey is where PreFilter leaves its state in the CycleState.
const stateKey fwk.StateKey = "PreFilter" + Name

// state is what PreFilter works out once per scheduling cycle, for Filter,
// Score and Reserve, and what preemption's dry run edits through AddPod and
// RemovePod on its clones.
type state struct {
	// subject is the pending pod among its peers, as the judge has it;
	// verdict the rules' answer. Both read-only once PreFilter returns.
	subject *judge.Subject
	verdict *judge.Verdict
	// removed are the peers that a preemption dry run took off their node.
	removed map[types.UID]bool
	// added are the conflicts with pods that a dry run put on a node and
	// that were no peer at PreFilter (nominated pods), by that pod's UID.
	added map[types.UID][]policy.Conflict
	// table sums the soft rules' penalties by domain, built by PreScore.
	table judge.Table
	// assumed is the pod as Reserve recorded it in the cache, for Unreserve.
	assumed *placement.Pod
	// shadow collects the candidates for the shadow policy (shadow.go);
	// nil without one, without peers, and in clones.
	shadow *shadowCandidates
	// log gathers the cycle's decision log events (decisionlog.go); nil
	// without a decision log. Clones share it.
	log *cycleLog
	// clone is set on preemption's and nominated pods' copies, whose
	// Filter calls are no candidates.
	clone bool
}

// Clone copies what AddPod and RemovePod change; the rest is shared.
func (s *state) Clone() fwk.StateData {
	c := *s
	c.removed = maps.Clone(s.removed)
	c.added = maps.Clone(s.added)
	// A preemption dry run's Filter calls are no candidates.
	c.shadow = nil
	c.clone = true
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

// PreFilter has the judge describe the pending pod, find its peers and
// judge the hard and soft rules against them, once for every candidate
// node. A pod in no group skips Filter: no rule can concern it.
func (pl *Regosched) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !pl.cache.HasSynced() {
		// The scheduler waits for its informers before its first cycle;
		// the cache's handler on them may lag a moment behind.
		syncCtx, cancel := context.WithTimeout(ctx, pl.syncTimeout)
		synced := pl.cache.WaitForSync(syncCtx)
		cancel()
		if !synced {
			return nil, fwk.NewStatus(fwk.Error, "regosched: the placement cache has not synced")
		}
	}
	// A policy that runs away must not hold the scheduler's one cycle.
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	var start time.Time
	if pl.decisionLog != nil {
		start = time.Now()
	}
	s, err := pl.prefilter(ctx, pod)
	if err != nil {
		err = fmt.Errorf("regosched: pod %s/%s: %w", pod.Namespace, pod.Name, err)
		if pl.decisionLog != nil {
			pl.logFilterError(pod, len(nodes), time.Since(start), err)
		}
		return nil, fwk.AsStatus(err)
	}
	if pl.decisionLog != nil {
		s.log = newCycleLog(pod, s.subject.Policy)
		s.log.took = time.Since(start)
	}
	if pl.shadow != nil && len(s.subject.Peers) > 0 {
		s.shadow = newShadowCandidates(s.verdict, len(nodes))
	}
	cs.Write(stateKey, s)
	if len(s.subject.Keys) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// prefilter builds the state of pod.
func (pl *Regosched) prefilter(ctx context.Context, pod *v1.Pod) (*state, error) {
	sub, err := pl.judge.Describe(ctx, pl.policies.Load(), pod)
	if err != nil {
		return nil, err
	}
	s := &state{subject: sub, removed: map[types.UID]bool{}, added: map[types.UID][]policy.Conflict{}}
	pl.judge.FindPeers(sub)
	if s.verdict, err = pl.judge.Judge(ctx, sub); err != nil {
		return nil, err
	}
	if s.verdict.HasConflicts() && pl.judge.Refresh(ctx, sub, pl.disputed(s.verdict)) {
		if s.verdict, err = pl.judge.Judge(ctx, sub); err != nil {
			return nil, err
		}
	}
	if err := pl.judge.WeighPreemption(ctx, s.verdict); err != nil {
		return nil, err
	}
	sub.Index() // Filter, AddPod and RemovePod read it from many goroutines
	s.verdict.Nodes(func(node string, cs []policy.Conflict) {
		pl.judge.Denied(sub, node, cs, s.verdict.Preemptible(node, nil), "filter")
	})
	return s, nil
}

// disputed picks the conflicting peers the scheduler's snapshot disagrees
// about, for the judge to re-read: absent from their node there, or with
// other labels. The scheduler retries a pod as soon as its own informer
// sees a peer deleted or relabelled, often before the placement cache
// has; the two views then disagree, and the API server settles it.
func (pl *Regosched) disputed(v *judge.Verdict) func(*placement.Pod) bool {
	conflicting := map[types.UID]bool{}
	v.Nodes(func(_ string, cs []policy.Conflict) {
		for _, c := range cs {
			conflicting[c.Peer] = true
		}
	})
	return func(peer *placement.Pod) bool {
		if !conflicting[peer.UID] || pl.snapshot == nil {
			return false
		}
		seen, ok := pl.inSnapshot(peer)
		return !ok || placement.NewLabels(seen.Labels) != peer.Labels
	}
}

// inSnapshot returns peer as the scheduler's snapshot has it on its node.
func (pl *Regosched) inSnapshot(peer *placement.Pod) (*v1.Pod, bool) {
	ni, err := pl.snapshot.NodeInfos().Get(peer.Node)
	if err != nil || ni == nil {
		return nil, false
	}
	for _, pi := range ni.GetPods() {
		if p := pi.GetPod(); p.UID == peer.UID {
			return p, true
		}
	}
	return nil, false
}

// PreFilterExtensions returns the plugin: preemption's dry run tells it
// which pods it takes off or puts on a node.
func (pl *Regosched) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// RemovePod takes a peer off its node for this cycle's clone of the state:
// the conflicts it caused there no longer count, which is what lets default
// preemption evict a lower-priority peer that breaks a rule (Filter has
// already turned away, as unresolvable, the nodes of protected peers).
func (pl *Regosched) RemovePod(_ context.Context, cs fwk.CycleState, _ *v1.Pod, info fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	// Default preemption's dry run: the filtering is over, and a
	// nomination would end the cycle before regosched's PostFilter.
	pl.logFilter(s.log, nil)
	uid := info.GetPod().UID
	if _, ok := s.subject.Peer(uid); ok {
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
	node := nodeInfo.Node()
	if _, ok := s.subject.Peer(add.UID); ok {
		delete(s.removed, add.UID)
		return nil
	}
	if add.Spec.NodeName != "" || add.UID == s.subject.Pod.UID || node == nil {
		// A bound pod that was no peer at PreFilter is in none of the
		// pending pod's groups: the cache indexes every bound pod in one.
		return nil
	}
	peer := placement.PodFromObject(add)
	peer.Node = node.Name
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	pol := s.subject.Policy
	keys, described, err := pol.DescribePeer(ctx, peer)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("regosched: nominated pod %s/%s: %w", add.Namespace, add.Name, err))
	}
	if !slices.ContainsFunc(keys, func(k string) bool { return slices.Contains(s.subject.Keys, k) }) {
		return nil
	}
	peer.Claims = described
	in := &policy.Input{Pod: s.subject.Pod, Peers: []*placement.Pod{peer}, Nodes: map[string]map[string]string{node.Name: node.Labels}}
	conflicts, err := pol.Conflicts(ctx, in)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("regosched: nominated pod %s/%s: %w", add.Namespace, add.Name, err))
	}
	if len(conflicts) > 0 {
		s.added[add.UID] = conflicts
	}
	return nil
}
