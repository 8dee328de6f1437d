package judge

import (
	"context"
	"fmt"
	"iter"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// FilterRequest asks the filter phase about one pending pod. The fields
// past Pod are how the two front ends differ, each said once here.
type FilterRequest struct {
	// Policy judges; nil is ErrNoPolicy.
	Policy *policy.Policy
	// Pod is the pending pod as the scheduler sent it.
	Pod *v1.Pod
	// Candidates are the nodes to decide, in the scheduler's order. Nil
	// decides none up front: a front end that asks node by node (the
	// plugin's Filter) calls Filtered.Decide.
	Candidates []string
	// CandidateLabels, if set, gives candidate i's labels (the extender's
	// request may carry whole nodes); else the placements' are read.
	CandidateLabels func(i int, name string) map[string]string
	// Wait, if set, runs once the pod's groups are known and before its
	// peers are read: the extender waits there for peers in flight.
	Wait func(ctx context.Context, s *Subject)
	// Doubt, if set, is asked after a judgement with conflicts which peers
	// to re-read from the API server (Refresh); a nil answer re-reads none.
	// The extender doubts when every candidate is refused to a pod it
	// verified; the plugin doubts the peers its scheduler's snapshot
	// disagrees about.
	Doubt func(ctx context.Context, f *Filtered) func(*model.Pod) bool
	// SoftTier folds the soft rules in: of the candidates no hard rule
	// refuses, only those of the lowest total penalty are kept, the others
	// refused as unresolvable (no eviction is asked for by a soft rule).
	SoftTier bool
}

// Filtered is the filter phase's answer for one pending pod.
type Filtered struct {
	Subject *Subject
	// Verdict is the rules' answer among the pod's peers.
	Verdict *Verdict
	// Refused are the candidates the hard rules turn away, in the
	// candidates' order; Refusals adds the soft tier's.
	Refused []Refusal
	// Candidates are the request's, for Doubt and the recorders.
	Candidates []string
	// ZonesYielded: every candidate was refused and no node of the
	// cluster took the pod, so the rules per zone yielded (YieldZones);
	// the front end reports it (Yielded) for a pod it knows is real.
	ZonesYielded bool
	// tier is the soft tier's answer, nil without one.
	tier *tier
}

// Refusal is one node turned away.
type Refusal struct {
	// Index is the node's place among the candidates (-1 from Decide).
	Index int
	Node  string
	// Resolvable says preemption may help: every conflicting peer on the
	// node may be evicted (a lower priority, not protected by the policy).
	Resolvable bool
	// Conflicts are the hard rules that refuse the node; none when only
	// the soft tier does, whose reason is soft.
	Conflicts []model.Conflict
	soft      string
}

// Reason is one line per distinct reason, sorted, as the extender shows it
// in the pod's FailedScheduling event. It is worked out when asked: the
// plugin, which asks for ReasonLines, pays for no joined string.
func (r Refusal) Reason() string {
	if len(r.Conflicts) == 0 {
		return r.soft
	}
	return Reasons(r.Conflicts)
}

// Filter is the whole filter phase for one pending pod: describe it, wait
// (Wait) and find its peers, judge the rules, re-read the peers in doubt
// (Doubt) and judge again, weigh preemption, decide the candidates (hard
// rules, then the soft tier) and log each refusal once.
func (j *Judge) Filter(ctx context.Context, req FilterRequest) (*Filtered, error) {
	s, err := j.Describe(ctx, req.Policy, req.Pod)
	if err != nil {
		return nil, err
	}
	if len(s.Keys) > 0 && req.Wait != nil {
		req.Wait(ctx, s)
	}
	j.FindPeers(s)
	f, err := j.judgeCandidates(ctx, s, req)
	if err != nil {
		return nil, err
	}
	if req.Doubt != nil && f.Verdict.HasConflicts() {
		if suspect := req.Doubt(ctx, f); suspect != nil && j.Refresh(ctx, s, suspect) {
			if f, err = j.judgeCandidates(ctx, s, req); err != nil {
				return nil, err
			}
		}
	}
	if req.Candidates == nil {
		// Node by node from here, from many goroutines (the framework's
		// parallel Filter calls): the peers' index is built now.
		s.Index()
		// Once per domain, not per node of a zone: the volume stays
		// bounded by the pod's peers.
		f.Verdict.Domains(func(d model.Domain, cs []model.Conflict) {
			where := d.Value
			if !d.OnNode() {
				where = d.String()
			}
			j.Denied(s, where, cs, d.OnNode() && f.Verdict.Preemptible(d.Value, nil), "filter")
		})
	}
	j.deniedCandidates(s, f.Refused)
	if req.SoftTier {
		j.softTier(f, req)
	}
	return f, nil
}

// judgeCandidates judges s and decides each of req's candidates by the
// hard rules, a candidate's labels read from the request when it has them.
func (j *Judge) judgeCandidates(ctx context.Context, s *Subject, req FilterRequest) (*Filtered, error) {
	candidates := req.Candidates
	v, err := Evaluate(ctx, s, j.cfg.Placements)
	if err != nil {
		return nil, err
	}
	if err := j.weighPreemption(ctx, v); err != nil {
		return nil, err
	}
	f := &Filtered{Subject: s, Verdict: v, Candidates: candidates}
	if !v.HasConflicts() {
		return f, nil
	}
	own := req.CandidateLabels != nil && v.PerDomain()
	f.Refused = v.refusals(f.Refused, candidates, req.CandidateLabels, own)
	if len(f.Refused) == len(candidates) && slices.ContainsFunc(f.Refused, func(r Refusal) bool { return perZoneAlone(r.Conflicts) }) &&
		v.YieldZones(j.cfg.Placements.NodeNames(), nil) {
		// Every candidate refused, some by rules per zone alone, and no
		// node of the cluster takes the pod: those rules yield, over every
		// node, as the plugin decides them.
		f.Refused = v.refusals(f.Refused[:0], candidates, req.CandidateLabels, own)
		f.ZonesYielded = true
	}
	return f, nil
}

// refusals appends to out the candidates v refuses, in order; own: read
// their labels from labels, not the cluster's.
func (v *Verdict) refusals(out []Refusal, candidates []string, labels func(int, string) map[string]string, own bool) []Refusal {
	// One look-up per candidate: most are turned away by the verdict's
	// fingerprint of the few nodes with conflicts.
	for i, name := range candidates {
		var l map[string]string
		if own {
			l = labels(i, name)
		}
		if cs := v.at(name, l, own); len(cs) > 0 {
			out = append(out, Refusal{Index: i, Node: name, Resolvable: v.preemptible(name, cs, nil), Conflicts: cs})
		}
	}
	return out
}

// AllRefused reports whether every candidate was refused.
func (f *Filtered) AllRefused() bool {
	return len(f.Candidates) > 0 && len(f.Refused) == len(f.Candidates)
}

// OnRefusedNode reports whether peer stands on a refused candidate: the
// extender's doubt when every candidate is refused.
func (f *Filtered) OnRefusedNode(peer *model.Pod) bool {
	for _, r := range f.Refused {
		if r.Node == peer.Node {
			return true
		}
	}
	return false
}

// Penalties are the soft rules' penalties (nil without peers).
func (f *Filtered) Penalties() []model.Penalty { return f.Verdict.Penalties }

// tier is the soft tier's answer: every candidate the hard rules keep
// whose total penalty is above best is refused. It keeps the totals
// rather than a Refusal per refused candidate, which at thousands of
// candidates would cost more than the rest of the request.
type tier struct {
	totals  []float64 // by candidate; from the judge's pool until Release
	best    float64
	demoted int
	reasons map[float64]string // one string per distinct total
	pool    *Totals
}

// reason is the soft tier's reason for a candidate of total t.
func (t *tier) reason(total float64) string {
	r, ok := t.reasons[total]
	if !ok {
		r = fmt.Sprintf("soft rules: penalty %g here, %g on the nodes kept", total, t.best)
		t.reasons[total] = r
	}
	return r
}

// Refusals are every refused candidate, the hard rules' and the soft
// tier's, in the candidates' order. The soft tier's are made as they are
// visited, so ranging costs no allocation per candidate.
func (f *Filtered) Refusals() iter.Seq[Refusal] {
	return func(yield func(Refusal) bool) {
		hard := f.Refused
		for i, name := range f.Candidates {
			if len(hard) > 0 && hard[0].Index == i {
				if !yield(hard[0]) {
					return
				}
				hard = hard[1:]
				continue
			}
			if f.tier == nil || f.tier.totals == nil {
				if len(hard) == 0 {
					return
				}
				continue
			}
			if total := f.tier.totals[i]; total != f.tier.best {
				if !yield(Refusal{Index: i, Node: name, soft: f.tier.reason(total)}) {
					return
				}
			}
		}
	}
}

// RefusedCount is how many candidates Refusals gives.
func (f *Filtered) RefusedCount() int {
	if f.tier == nil {
		return len(f.Refused)
	}
	return len(f.Refused) + f.tier.demoted
}

// Release gives the soft tier's buffer back once Refusals has been ranged
// over for the last time; Refusals gives the hard rules' alone after it.
func (f *Filtered) Release() {
	if f.tier != nil && f.tier.totals != nil {
		f.tier.pool.Put(f.tier.totals)
		f.tier.totals = nil
	}
}

// softTier refuses, of the candidates the hard rules keep, those above
// the lowest total penalty; with equal totals it refuses none.
func (j *Judge) softTier(f *Filtered, req FilterRequest) {
	table, ok := NewTable(f.Verdict.Penalties)
	if !ok || f.AllRefused() {
		return
	}
	labels := req.CandidateLabels
	if labels == nil {
		labels = func(_ int, name string) map[string]string {
			l, _ := j.cfg.Placements.NodeLabels(name)
			return l
		}
	}
	totals := j.totals.Get(len(req.Candidates))
	best, worst := math.Inf(1), 0.0
	hard := f.Refused
	for i, name := range req.Candidates {
		if len(hard) > 0 && hard[0].Index == i {
			hard = hard[1:]
			totals[i] = math.NaN() // refused already: never equal to best, never demoted twice
			continue
		}
		var l map[string]string
		if table.NeedsLabels() {
			l = labels(i, name)
		}
		totals[i] = table.Total(name, l)
		best, worst = min(best, totals[i]), max(worst, totals[i])
	}
	if worst == best {
		j.totals.Put(totals)
		return
	}
	t := &tier{totals: totals, best: best, reasons: map[float64]string{}, pool: &j.totals}
	for i := range totals {
		if !math.IsNaN(totals[i]) && totals[i] != best {
			t.demoted++
		}
	}
	f.tier = t
}
