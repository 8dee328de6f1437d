package plugin

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/shadow"
)

// The shadow rollout (Args.ShadowPolicy) judges a second bundle beside the
// active one and never enforces it, as `regosched serve --shadow-policy`
// does: both front ends hand internal/ops/shadow the same request, and the
// shadow judges it with the one judge, off the scheduling cycle.
//
// What the extender's filter call has and PreFilter has not is the list
// of candidates: the nodes every other filter let through (the extender
// runs after them), as the scheduler sampled them. A disagreement is
// counted per candidate, so the plugin takes the same list: Filter notes
// each node it is called for in the cycle's own state (the framework calls
// it only for nodes every filter before it passed; a preemption dry run's
// clones note nothing), and the request is offered once the filtering is
// over, at the first extension point after it: PreScore (two or more
// feasible nodes), Reserve (one) or PostFilter (none, once the default
// preemption it wraps found no victims). A cycle that ends before
// (preemption nominating a node, a Reserve plugin before regosched's
// failing) offers nothing.

// shadowCandidates collects one cycle's candidates for the shadow.
type shadowCandidates struct {
	// request is the active judgement, its Nodes and Denied filled at
	// offer from verdict.
	request *shadow.Request
	verdict *judge.Verdict
	// slots has a slot per node PreFilter was given; Filter's parallel
	// calls take one each through next, and any beyond go to overflow.
	slots    []string
	next     atomic.Int64
	mu       sync.Mutex
	overflow []string
	offered  atomic.Bool
}

// newShadowCandidates copies what the shadow needs of the active
// judgement f: the pod, its peers, the nodes the hard rules turned away
// with their reasons, and the soft rules' penalties.
func newShadowCandidates(f *judge.Filtered, nodes int) *shadowCandidates {
	return &shadowCandidates{request: shadow.FilterRequestOf(f, nil), verdict: f.Verdict, slots: make([]string, nodes)}
}

// saw notes a candidate; safe from many goroutines.
func (c *shadowCandidates) saw(node string) {
	if i := c.next.Add(1) - 1; i < int64(len(c.slots)) {
		c.slots[i] = node
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.overflow = append(c.overflow, node)
}

// offer hands the request to o, once, with the candidates noted; with
// none (other filters turned every node away) there is nothing to compare.
// The framework calls it after Filter's calls have returned.
func (c *shadowCandidates) offer(o shadow.Offerer) {
	if c == nil || !c.offered.CompareAndSwap(false, true) {
		return
	}
	n := min(c.next.Load(), int64(len(c.slots)))
	c.mu.Lock()
	nodes := c.slots[:n]
	if len(c.overflow) > 0 { // PreFilter was given fewer nodes than Filter saw
		nodes = slices.Concat(nodes, c.overflow)
	}
	c.request.Nodes = nodes
	c.mu.Unlock()
	maps.Copy(c.request.Denied, c.verdict.Denied(nodes))
	if len(c.request.Nodes) > 0 {
		o.Offer(c.request)
	}
}

// offerShadow offers the cycle's shadow request, if there is one.
func (pl *Regosched) offerShadow(cs fwk.CycleState) {
	if pl.shadow == nil {
		return
	}
	if s, err := getState(cs); err == nil {
		s.shadow.offer(pl.shadow)
	}
}

// PostFilter runs default preemption, which never evicts a pod the policy
// protects (preemption.go), and, when it nominates no node, offers the
// shadow the cycle in which no node fit.
func (pl *Regosched) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	var res *fwk.PostFilterResult
	st := fwk.NewStatus(fwk.Unschedulable)
	if pl.preemption != nil {
		// A nomination or an error ends the cycle here, as the stock plugin's would.
		if res, st = pl.preemption.postFilter(ctx, cs, pod, m, pl.cyclePolicy(cs)); !st.IsRejected() {
			return res, st
		}
	}
	pl.offerShadow(cs)
	if pl.decisionLog != nil {
		pl.logFilter(cycleLogOf(cs), nil)
	}
	return res, st
}

// cyclePolicy is the policy the cycle started with, or the active one.
func (pl *Regosched) cyclePolicy(cs fwk.CycleState) *policy.Policy {
	if s, err := getState(cs); err == nil && s.subject != nil && s.subject.Policy != nil {
		return s.subject.Policy
	}
	return pl.policies.Load()
}
