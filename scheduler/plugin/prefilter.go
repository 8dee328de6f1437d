package plugin

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// stateKey is where PreFilter leaves its state in the CycleState.
const stateKey fwk.StateKey = "PreFilter" + Name

// state is what PreFilter works out once per scheduling cycle, for Filter,
// Score and Reserve, and what preemption's dry run edits through AddPod and
// RemovePod on its clones.
type state struct {
	// filtered is the core's filter phase for the pod, read-only once
	// PreFilter returns; subject is its Subject.
	filtered *judge.Filtered
	subject  *judge.Subject
	// edits are a preemption dry run's changes to the peers (AddPod,
	// RemovePod), on the state's clones.
	edits judge.Edits
	// table sums the soft rules' penalties by domain, built by PreScore.
	table judge.Table
	// assumed is the pod as Reserve recorded it in the cache, for Unreserve.
	assumed *model.Pod
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
	c.edits = s.edits.Clone()
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
		s.shadow = newShadowCandidates(s.filtered, len(nodes))
	}
	cs.Write(stateKey, s)
	if len(s.subject.Keys) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// prefilter builds the state of pod: the core's filter phase with no
// candidates (Filter asks node by node), doubting the peers the
// scheduler's snapshot disagrees about.
func (pl *Regosched) prefilter(ctx context.Context, pod *v1.Pod) (*state, error) {
	f, err := pl.judge.Filter(ctx, judge.FilterRequest{Policy: pl.policies.Load(), Pod: pod, Doubt: pl.disputed})
	if err != nil {
		return nil, err
	}
	if f.Verdict.PerDomain() && pl.snapshot != nil {
		// Filter decides node by node: whether the rules per zone would
		// leave the pod nowhere is asked of every node now, only when such
		// a rule refuses any.
		if infos, err := pl.snapshot.NodeInfos().List(); err == nil {
			names := make([]string, len(infos))
			for i, ni := range infos {
				names[i] = ni.Node().Name
			}
			if f.Verdict.YieldZones(names, func(i int, _ string) map[string]string { return infos[i].Node().Labels }) {
				pl.judge.Yielded(f.Subject, f.Verdict, "filter")
			}
		}
	}
	return &state{filtered: f, subject: f.Subject}, nil
}

// disputed picks the conflicting peers the scheduler's snapshot disagrees
// about, for the judge to re-read: absent from their node there, or with
// other labels. The scheduler retries a pod as soon as its own informer
// sees a peer deleted or relabelled, often before the placement cache
// has; the two views then disagree, and the API server settles it.
func (pl *Regosched) disputed(_ context.Context, f *judge.Filtered) func(*model.Pod) bool {
	conflicting := map[types.UID]bool{}
	for _, c := range f.Verdict.Conflicts() {
		conflicting[c.Peer] = true
	}
	return func(peer *model.Pod) bool {
		if !conflicting[peer.UID] || pl.snapshot == nil {
			return false
		}
		seen, ok := pl.inSnapshot(peer)
		return !ok || model.NewLabels(seen.Labels) != peer.Labels
	}
}

// inSnapshot returns peer as the scheduler's snapshot has it on its node.
func (pl *Regosched) inSnapshot(peer *model.Pod) (*v1.Pod, bool) {
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
	s.edits.Remove(s.filtered, info.GetPod().UID)
	return nil
}

// AddPod puts a pod on a node for this cycle's clone of the state: a peer
// removed before counts again (a victim reprieved), and a nominated pod
// that shares a group with the pending pod is judged (judge.Edits.Add).
func (pl *Regosched) AddPod(ctx context.Context, cs fwk.CycleState, _ *v1.Pod, info fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	add := info.GetPod()
	if err := s.edits.Add(ctx, s.filtered, add, nodeInfo.Node()); err != nil {
		return fwk.AsStatus(fmt.Errorf("regosched: nominated pod %s/%s: %w", add.Namespace, add.Name, err))
	}
	return nil
}
