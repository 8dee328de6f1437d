package decision

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/ops/shadow"
)

// FilterAnswer is filter's decision on one pod's candidate nodes in the
// extender's terms: which fail, and why. Answer and AnswerInPlace turn it
// into the extender's result.
type FilterAnswer struct {
	// failed holds FailedNodes and FailedAndUnresolvableNodes only.
	failed *extenderv1.ExtenderFilterResult
	// kept holds the runs of passing candidates, start and end index in
	// pairs, in the request's order.
	kept []int
}

// NewFilterAnswer is the answer that fails the candidates of args in failed
// (preemption may help) and unresolvable, with their reasons, and passes the
// rest: for deciders other than Filter, such as test doubles.
func NewFilterAnswer(args *extenderv1.ExtenderArgs, failed, unresolvable extenderv1.FailedNodesMap) *FilterAnswer {
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
	return &FilterAnswer{
		failed: &extenderv1.ExtenderFilterResult{FailedNodes: failed, FailedAndUnresolvableNodes: unresolvable},
		kept:   compactRuns(kept),
	}
}

// Answer is the extender's answer to args, the request the verdict is on:
// the failing candidates with their reasons, and the passing ones in the
// request's form (NodeNames for NodeNames, Nodes for Nodes) in a list of
// their own. args is left as it came.
func (v *FilterAnswer) Answer(args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	return v.answer(args, collect[string], collect[v1.Node])
}

// AnswerInPlace is Answer for a caller that owns args' candidate list and
// reads it no more: the passing candidates are moved to its front, which
// spares a copy of thousands of candidates per request.
func (v *FilterAnswer) AnswerInPlace(args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	return v.answer(args, moveToFront[string], moveToFront[v1.Node])
}

// answer is the extender's answer with the passing candidates that names
// or nodes pick from the request's list, in its form.
func (v *FilterAnswer) answer(args *extenderv1.ExtenderArgs, names func([]string, []int) []string, nodes func([]v1.Node, []int) []v1.Node) *extenderv1.ExtenderFilterResult {
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

// Filter answers the extender's filter verb through the core's filter
// phase (judge.Filter): a node fails where the pending pod would break a
// hard rule, as FailedNodes when preemption may help, otherwise as
// FailedAndUnresolvableNodes. args is only read.
func (d *Decider) Filter(ctx context.Context, args *extenderv1.ExtenderArgs) (*FilterAnswer, error) {
	var start time.Time
	if d.opts.DecisionLog != nil {
		start = time.Now()
	}
	ectx, cancel := d.evalContext(ctx)
	defer cancel()
	a, f, err := d.filter(ectx, args)
	err = d.evalError(ectx, args.Pod, err)
	if d.opts.DecisionLog != nil {
		d.logFilter(start, args, f, err)
	}
	return a, err
}

// filter is Filter, with ctx bounding the policy's evaluations and the API
// reads; it returns the core's answer too (nil if none), for the decision
// log. What only an HTTP front end needs stays here: the in-flight wait,
// the check that the call is for a real pending pod of the profile before
// any API read or reservation, and the score hand-over to prioritize.
func (d *Decider) filter(ctx context.Context, args *extenderv1.ExtenderArgs) (*FilterAnswer, *judge.Filtered, error) {
	pending := &pendingCheck{}
	req := judge.FilterRequest{
		Policy: d.policies.Load(), Pod: args.Pod, Candidates: candidateNames(args), SoftTier: d.opts.SoftInFilter,
		// Peers are re-read only for a pod the API server has as the
		// profile's pending pod, when every candidate was refused: a forged
		// call must not spend the reads binds need, and the extender has no
		// second view of the cluster to tell a suspect peer by.
		Doubt: func(ctx context.Context, f *judge.Filtered) func(*model.Pod) bool {
			if !f.AllRefused() || !d.isPendingPod(ctx, f.Subject, pending) {
				return nil
			}
			return f.OnRefusedNode
		},
	}
	if args.NodeNames == nil && args.Nodes != nil {
		req.CandidateLabels = func(i int, _ string) map[string]string { return args.Nodes.Items[i].Labels }
	}
	if d.opts.MaxWait > 0 {
		req.Wait = d.waitForPeers
	}
	f, err := d.judge.Filter(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	s := f.Subject
	if f.ZonesYielded && d.isPendingPod(ctx, s, pending) {
		d.judge.Yielded(s, f.Verdict, "filter") // an Event on a real pod only
	}
	// Prioritize, next, scores with these instead of evaluating again.
	d.scores.put(s.Pod.UID, s.Policy, f.Penalties())
	a := answerOf(f)
	f.Release()
	if d.opts.Shadow != nil && len(s.Peers) > 0 {
		// The hard rules' answers alone: the shadow compares those, off
		// this request.
		d.opts.Shadow.Offer(shadow.FilterRequestOf(f, f.Candidates))
	}
	if len(a.kept) > 0 && d.isPendingPod(ctx, s, pending) {
		// From now until its binding is seen, this pod holds its peers'
		// filter calls back (when in-flight tracking is on): they must not
		// decide without knowing its node. The record also spares the bind
		// verb an API read of the pod.
		d.placements.Reserve(s.Pod, s.Keys, d.opts.InFlightTTL, s.Policy.Origin())
	}
	d.log.WithFields(map[string]any{
		"pod": s.Pod.Key(), "candidates": len(f.Candidates), "refused": f.RefusedCount(),
	}).Debug("filter")
	return a, f, nil
}

// answerOf is the extender's form of f: the refused candidates by reason,
// resolvable or not, and the runs of kept ones between them.
func answerOf(f *judge.Filtered) *FilterAnswer {
	a := &FilterAnswer{failed: &extenderv1.ExtenderFilterResult{}}
	// The soft tier refuses too, with no conflict to show for it.
	if f.RefusedCount() > 0 || f.Verdict.HasConflicts() {
		a.failed.FailedNodes = extenderv1.FailedNodesMap{}
		a.failed.FailedAndUnresolvableNodes = extenderv1.FailedNodesMap{}
	}
	start := 0
	for r := range f.Refusals() {
		a.kept = append(a.kept, start, r.Index)
		start = r.Index + 1
		if r.Resolvable {
			a.failed.FailedNodes[r.Node] = r.Reason()
		} else {
			a.failed.FailedAndUnresolvableNodes[r.Node] = r.Reason()
		}
	}
	a.kept = compactRuns(append(a.kept, start, len(f.Candidates)))
	return a
}

// FilterAnswer is Filter's answer as the extender's result (Answer).
func (d *Decider) FilterAnswer(ctx context.Context, args *extenderv1.ExtenderArgs) (*extenderv1.ExtenderFilterResult, error) {
	a, err := d.Filter(ctx, args)
	if err != nil {
		return nil, err
	}
	return a.Answer(args), nil
}

// pendingCheck keeps, for one request, whether its pod was found to be a
// pending pod of the profile, once asked.
type pendingCheck struct {
	asked, pending bool
}

// isPendingPod reports whether s's pod, as the filter call describes it, is a
// pending pod of the profile as the API server has it: a call for a pod that
// does not exist, or with other labels, must leave no reservation that
// holds real peers back or that bind would trust. Pods the pending informer
// reported are checked in memory; others (not reported yet) are read.
//
// With no SchedulerName nothing is: no pod can be told to be the profile's.
// The answer is kept in c, so a request reads the pod once at most; reads
// come from the budget all filter calls share (filterReads), and a pod that
// cannot be read within it is not trusted.
func (d *Decider) isPendingPod(ctx context.Context, s *judge.Subject, c *pendingCheck) bool {
	if !c.asked {
		c.asked, c.pending = true, d.checkPendingPod(ctx, s)
	}
	return c.pending
}

func (d *Decider) checkPendingPod(ctx context.Context, s *judge.Subject) bool {
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
	real := model.PodFromObject(obj)
	return obj.UID == own.UID && obj.Spec.NodeName == "" && obj.Spec.SchedulerName == d.opts.SchedulerName &&
		real.Labels == own.Labels && real.Priority == own.Priority
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
