package decision

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/judge"
	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
	"github.com/regosched/regosched/internal/shadow"
)

// Verdict is filter's decision on one pod's candidate nodes: which fail, and
// why. Answer and AnswerInPlace turn it into the extender's answer.
type Verdict struct {
	// failed holds FailedNodes and FailedAndUnresolvableNodes only.
	failed *extenderv1.ExtenderFilterResult
	// kept holds the runs of passing candidates, start and end index in
	// pairs, in the request's order.
	kept []int
}

// NewVerdict is the verdict that fails the candidates of args in failed
// (preemption may help) and unresolvable, with their reasons, and passes the
// rest: for deciders other than Filter, such as test doubles.
func NewVerdict(args *extenderv1.ExtenderArgs, failed, unresolvable extenderv1.FailedNodesMap) *Verdict {
	names := candidateNames(args)
	var kept []int
	start := 0
	for i, name := range names {
		_, a := failed[name]
		_, b := unresolvable[name]
		if a || b {
			kept = append(kept, start, i)
			start = i + 1
		}
	}
	kept = append(kept, start, len(names))
	return &Verdict{
		failed: &extenderv1.ExtenderFilterResult{FailedNodes: failed, FailedAndUnresolvableNodes: unresolvable},
		kept:   compactRuns(kept),
	}
}

// Answer is the extender's answer to args, the request the verdict is on:
// the failing candidates with their reasons, and the passing ones in the
// request's form (NodeNames for NodeNames, Nodes for Nodes) in a list of
// their own. args is left as it came.
func (v *Verdict) Answer(args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	return v.answer(args, collect[string], collect[v1.Node])
}

// AnswerInPlace is Answer for a caller that owns args' candidate list and
// reads it no more: the passing candidates are moved to its front, which
// spares a copy of thousands of candidates per request.
func (v *Verdict) AnswerInPlace(args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	return v.answer(args, moveToFront[string], moveToFront[v1.Node])
}

// answer is the extender's answer with the passing candidates that names
// or nodes pick from the request's list, in its form.
func (v *Verdict) answer(args *extenderv1.ExtenderArgs, names func([]string, []int) []string, nodes func([]v1.Node, []int) []v1.Node) *extenderv1.ExtenderFilterResult {
	r := *v.failed
	switch {
	case args.NodeNames != nil:
		kept := names(*args.NodeNames, v.kept)
		r.NodeNames = &kept
	case args.Nodes != nil:
		r.Nodes = &v1.NodeList{ListMeta: args.Nodes.ListMeta, Items: nodes(args.Nodes.Items, v.kept)}
	}
	return &r
}

// Filter judges the candidate nodes of args: a node fails where the pending
// pod would break a hard rule, as FailedNodes when every conflicting peer on
// it has a lower priority than the pod (preemption may help), otherwise as
// FailedAndUnresolvableNodes. args is only read.
func (d *Decider) Filter(ctx context.Context, args *extenderv1.ExtenderArgs) (*Verdict, error) {
	var start time.Time
	if d.opts.DecisionLog != nil {
		start = time.Now()
	}
	ectx, cancel := d.evalContext(ctx)
	defer cancel()
	v, s, err := d.filterPod(ctx, ectx, args)
	err = d.evalError(ectx, args.Pod, err)
	if d.opts.DecisionLog != nil {
		d.logFilter(start, args, s, v, err)
	}
	return v, err
}

// filterPod is Filter, with ectx bounding the policy's evaluations and ctx
// the API reads; it returns the subject too (nil if none was made), for
// the decision log.
func (d *Decider) filterPod(ctx, ectx context.Context, args *extenderv1.ExtenderArgs) (*Verdict, *subject, error) {
	s, err := d.lookup(ectx, args.Pod, true)
	if err != nil {
		return nil, nil, err
	}
	result, kept, penalties, err := d.filter(ectx, s, args)
	if err != nil {
		return nil, s, err
	}
	// Peers are re-read only for a pod the API server has as the profile's
	// pending pod: a forged call must not spend the reads binds need.
	if len(kept) == 0 && d.isPendingPod(ctx, s) && d.refreshPeers(ctx, s, result) {
		if result, kept, penalties, err = d.filter(ectx, s, args); err != nil {
			return nil, s, err
		}
	}
	if d.opts.Shadow != nil && len(s.Peers) > 0 {
		// Copied before the soft rules fold into result: the shadow
		// compares the hard rules' answers, off this request.
		r := shadow.NewFilterRequest(s.Pod, s.Peers, candidateNames(args), result.FailedNodes, result.FailedAndUnresolvableNodes)
		r.Penalties = penalties // the judge's, never changed after
		d.opts.Shadow.Offer(r)
	}
	if d.opts.SoftInFilter {
		kept = d.keepBestTier(args, s, penalties, result, kept)
	}
	if len(kept) > 0 && d.isPendingPod(ctx, s) {
		// From now until its binding is seen, this pod holds its peers'
		// filter calls back (when in-flight tracking is on): they must not
		// decide without knowing its node. The record also spares the bind
		// verb an API read of the pod.
		d.placements.Reserve(s.Pod, s.Keys, d.opts.InFlightTTL, s.Policy.Origin())
	}
	return &Verdict{failed: result, kept: kept}, s, nil
}

// FilterAnswer is Filter's verdict as the extender's answer (Answer).
func (d *Decider) FilterAnswer(ctx context.Context, args *extenderv1.ExtenderArgs) (*extenderv1.ExtenderFilterResult, error) {
	v, err := d.Filter(ctx, args)
	if err != nil {
		return nil, err
	}
	return v.Answer(args), nil
}

// isPendingPod reports whether s's pod, as the filter call describes it, is a
// pending pod of the profile as the API server has it: a call for a pod that
// does not exist, or with other labels, must leave no reservation that
// holds real peers back or that bind would trust. Pods the pending informer
// reported are checked in memory; others (not reported yet) are read.
//
// With no SchedulerName nothing is: no pod can be told to be the profile's.
// The answer is kept in s, so a request reads the pod once at most; reads
// come from the budget all filter calls share (filterReads), and a pod that
// cannot be read within it is not trusted.
func (d *Decider) isPendingPod(ctx context.Context, s *subject) bool {
	if s.verified != unverified {
		return s.verified == verifiedPending
	}
	ok := d.checkPendingPod(ctx, s)
	s.verified = notPending
	if ok {
		s.verified = verifiedPending
	}
	return ok
}

func (d *Decider) checkPendingPod(ctx context.Context, s *subject) bool {
	if d.opts.SchedulerName == "" {
		return false
	}
	own := *s.Pod
	own.Labels = s.OwnLabels
	if d.opts.Pending != nil && d.opts.Pending.Is(&own) {
		return true
	}
	if d.opts.Client == nil || !d.filterReads.TryAccept() {
		return false
	}
	obj, err := d.opts.Client.CoreV1().Pods(own.Namespace).Get(ctx, own.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	real := placement.PodFromObject(obj)
	return obj.UID == own.UID && obj.Spec.NodeName == "" && obj.Spec.SchedulerName == d.opts.SchedulerName &&
		real.Labels == own.Labels && real.Priority == own.Priority
}

// refreshPeers has the judge re-read the peers that made every candidate
// fail (judge.Refresh says what is stale), and reports whether any was.
// The extender has no second view of the cluster to tell a suspect peer
// by, so only a total refusal is checked: it is rare, and it is the one
// that strands a pod.
func (d *Decider) refreshPeers(ctx context.Context, s *subject, r *extenderv1.ExtenderFilterResult) bool {
	return d.judge.Refresh(ctx, s.Subject, func(p *placement.Pod) bool {
		_, a := r.FailedNodes[p.Node]
		_, b := r.FailedAndUnresolvableNodes[p.Node]
		return a || b
	})
}

// filter decides which candidates fail, and returns the runs of the kept
// ones (start and end index in the candidates, in pairs; none when none is
// kept) for keep to apply, and the pod's soft-rule penalties: the candidate
// list is not touched until the last decision, as Filter may decide twice.
func (d *Decider) filter(ctx context.Context, s *subject, args *extenderv1.ExtenderArgs) (*extenderv1.ExtenderFilterResult, []int, []policy.Penalty, error) {
	names := candidateNames(args)
	all := compactRuns([]int{0, len(names)})
	s.denied = s.denied[:0] // a second judgement replaces the first's
	if len(s.Peers) == 0 {
		d.scores.put(s.Pod.UID, s.Policy, nil) // nothing to prefer: prioritize need not look
		return &extenderv1.ExtenderFilterResult{}, all, nil, nil
	}
	v, err := d.judge.Judge(ctx, s.Subject)
	if err != nil {
		return nil, nil, nil, err
	}
	// Prioritize, next, scores with these instead of evaluating again.
	d.scores.put(s.Pod.UID, s.Policy, v.Penalties)
	if !v.HasConflicts() {
		return &extenderv1.ExtenderFilterResult{}, all, v.Penalties, nil
	}
	if err := d.judge.WeighPreemption(ctx, v); err != nil {
		return nil, nil, nil, err
	}
	result := &extenderv1.ExtenderFilterResult{
		FailedNodes:                extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
	}
	// One pass over the candidates, in the scheduler's order: a look-up in
	// the verdict (a handful of nodes, most candidates turned away by its
	// fingerprint) per name; the kept ones are picked later (Answer,
	// AnswerInPlace), in runs between failed ones rather than one by one.
	var kept []int // start and end of each run of kept candidates
	start := 0
	for i, name := range names {
		cs := v.At(name)
		if len(cs) == 0 {
			continue
		}
		kept = append(kept, start, i)
		start = i + 1
		resolvable := v.Preemptible(name, nil)
		d.judge.Denied(s.Subject, name, cs, resolvable, "filter")
		if d.opts.DecisionLog != nil {
			s.denied = judge.DecisionLogDenials(s.denied, s.Subject, cs)
		}
		reason := judge.Reasons(cs)
		if resolvable {
			result.FailedNodes[name] = reason
		} else {
			result.FailedAndUnresolvableNodes[name] = reason
		}
	}
	if start < len(names) {
		kept = append(kept, start, len(names))
	}
	d.log.WithFields(map[string]any{
		"pod":          s.Pod.Key(),
		"candidates":   len(names),
		"failed":       len(result.FailedNodes),
		"unresolvable": len(result.FailedAndUnresolvableNodes),
	}).Debug("filter")
	return result, compactRuns(kept), v.Penalties, nil
}

// compactRuns drops the empty runs (between adjacent failed candidates).
func compactRuns(kept []int) []int {
	out := kept[:0]
	for r := 0; r < len(kept); r += 2 {
		if kept[r] < kept[r+1] {
			out = append(out, kept[r], kept[r+1])
		}
	}
	return out
}

// moveToFront moves the runs kept of s to its front, in order, and returns
// that front part. copy handles the overlap, which is always towards the
// front.
func moveToFront[T any](s []T, kept []int) []T {
	n := 0
	for r := 0; r < len(kept); r += 2 {
		if kept[r] != n { // a run already in place is not copied onto itself
			copy(s[n:], s[kept[r]:kept[r+1]])
		}
		n += kept[r+1] - kept[r]
	}
	return s[:n]
}

// collect returns the runs kept of s, in order, in a new slice.
func collect[T any](s []T, kept []int) []T {
	n := 0
	for r := 0; r < len(kept); r += 2 {
		n += kept[r+1] - kept[r]
	}
	out := make([]T, 0, n)
	for r := 0; r < len(kept); r += 2 {
		out = append(out, s[kept[r]:kept[r+1]]...)
	}
	return out
}
