package decision

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
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
	ectx, cancel := d.evalContext(ctx)
	defer cancel()
	v, err := d.filterPod(ctx, ectx, args)
	return v, d.evalError(ectx, args.Pod, err)
}

// filterPod is Filter, with ectx bounding the policy's evaluations and ctx
// the API reads.
func (d *Decider) filterPod(ctx, ectx context.Context, args *extenderv1.ExtenderArgs) (*Verdict, error) {
	s, err := d.lookup(ectx, args.Pod, true)
	if err != nil {
		return nil, err
	}
	result, kept, penalties, err := d.filter(ectx, s, args)
	if err != nil {
		return nil, err
	}
	// Peers are re-read only for a pod the API server has as the profile's
	// pending pod: a forged call must not spend the reads binds need.
	if len(kept) == 0 && d.isPendingPod(ctx, s) && d.refreshPeers(ctx, s, result) {
		if result, kept, penalties, err = d.filter(ectx, s, args); err != nil {
			return nil, err
		}
	}
	if d.opts.SoftInFilter {
		kept = d.keepBestTier(args, s, penalties, result, kept)
	}
	if len(kept) > 0 && d.isPendingPod(ctx, s) {
		// From now until its binding is seen, this pod holds its peers'
		// filter calls back (when in-flight tracking is on): they must not
		// decide without knowing its node. The record also spares the bind
		// verb an API read of the pod.
		d.placements.Reserve(s.pod, s.keys, d.opts.InFlightTTL, s.policy.Origin())
	}
	return &Verdict{failed: result, kept: kept}, nil
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
	own := *s.pod
	own.Labels = s.ownLabels
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

// maxRefresh bounds the API reads of refreshPeers for one request: a peer
// deleted or relabelled just before the retry is the case it serves, so a
// few reads find it, and more would only spend the budget binds share.
const maxRefresh = 4

// refreshPeers re-reads from the API the peers that made every candidate
// fail, and reports whether any of them was stale (gone, replaced, moved,
// finished or relabelled), in which case s.peers now holds the fresh view.
//
// Why: deleting a peer makes kube-scheduler retry the pods it blocked at
// once, often before our informer has processed the deletion. Refusing
// then would park the pod as unschedulable until some unrelated event (or
// the scheduler's 5-minute flush). Only a total refusal is checked: it is
// rare, and it is the one that strands a pod.
func (d *Decider) refreshPeers(ctx context.Context, s *subject, r *extenderv1.ExtenderFilterResult) bool {
	if d.opts.Client == nil {
		return false
	}
	failed := func(node string) bool {
		_, a := r.FailedNodes[node]
		_, b := r.FailedAndUnresolvableNodes[node]
		return a || b
	}
	fresh := make([]*placement.Pod, 0, len(s.peers))
	stale, reads := false, 0
	for _, p := range s.peers {
		if !failed(p.Node) || reads >= maxRefresh || !d.refreshReads.TryAccept() {
			fresh = append(fresh, p)
			continue
		}
		reads++
		obj, err := d.opts.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			stale = true // deleted: drop it
		case err != nil:
			fresh = append(fresh, p) // cannot tell: keep what the cache says
		case obj.UID != p.UID || obj.Spec.NodeName != p.Node ||
			obj.Status.Phase == v1.PodSucceeded || obj.Status.Phase == v1.PodFailed:
			stale = true
		case placement.NewLabels(obj.Labels) != p.Labels:
			stale = true
			fresh = append(fresh, placement.PodFromObject(obj))
		default:
			fresh = append(fresh, p)
		}
	}
	if stale {
		d.log.WithField("pod", s.pod.Key()).Debug("placement cache was behind the API; decided again on fresh peers")
		s.peers = fresh
	}
	return stale
}

// filter decides which candidates fail, and returns the runs of the kept
// ones (start and end index in the candidates, in pairs; none when none is
// kept) for keep to apply, and the pod's soft-rule penalties: the candidate
// list is not touched until the last decision, as Filter may decide twice.
func (d *Decider) filter(ctx context.Context, s *subject, args *extenderv1.ExtenderArgs) (*extenderv1.ExtenderFilterResult, []int, []policy.Penalty, error) {
	names := candidateNames(args)
	all := compactRuns([]int{0, len(names)})
	if len(s.peers) == 0 {
		d.scores.put(s.pod.UID, s.policy, nil) // nothing to prefer: prioritize need not look
		return &extenderv1.ExtenderFilterResult{}, all, nil, nil
	}
	conflicts, penalties, err := s.policy.Judge(ctx, d.input(s))
	if err != nil {
		return nil, nil, nil, err
	}
	// Prioritize, next, scores with these instead of evaluating again.
	d.scores.put(s.pod.UID, s.policy, penalties)
	if len(conflicts) == 0 {
		return &extenderv1.ExtenderFilterResult{}, all, penalties, nil
	}
	conflictsAt := map[string][]policy.Conflict{}
	for _, c := range conflicts {
		conflictsAt[c.Node] = append(conflictsAt[c.Node], c)
	}
	byNode := newFewNodes(conflictsAt)
	result := &extenderv1.ExtenderFilterResult{
		FailedNodes:                extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
	}
	// One pass over the candidates, in the scheduler's order: a look-up in
	// byNode (a handful of nodes, most candidates turned away by its
	// fingerprint) per name; the kept ones are picked later (Answer,
	// AnswerInPlace), in runs between failed ones rather than one by one.
	var kept []int // start and end of each run of kept candidates
	start := 0
	for i, name := range names {
		cs, ok := byNode.get(name)
		if !ok {
			continue
		}
		kept = append(kept, start, i)
		start = i + 1
		resolvable := true
		for _, c := range cs {
			if !s.evictable(c.Peer) {
				resolvable = false
			}
		}
		for _, c := range cs {
			d.denials.WithLabelValues(c.Rule, strconv.FormatBool(resolvable)).Inc()
			d.logDenial(s, name, c, resolvable)
		}
		reason := joinReasons(cs)
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
		"pod":          s.pod.Key(),
		"candidates":   len(names),
		"failed":       len(result.FailedNodes),
		"unresolvable": len(result.FailedAndUnresolvableNodes),
	}).Debug("filter")
	return result, compactRuns(kept), penalties, nil
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

// logDenial is the decision log of one hard denial: which rule kept the
// pod off which node, because of which peer, under which policy revision.
// There is one per conflicting peer's node, not per candidate node, so the
// volume is bounded by the pod's peers however large the cluster.
func (d *Decider) logDenial(s *subject, node string, c policy.Conflict, resolvable bool) {
	fields := logrus.Fields{
		"pod": s.pod.Key(), "node": node, "rule": c.Rule, "reason": c.Reason,
		"resolvable": resolvable, "policyRevision": s.policy.Revision(), "verb": "filter",
	}
	if p, ok := s.peer(c.Peer); ok {
		fields["peer"] = p.Key()
	}
	d.log.WithFields(fields).Info("denied")
}

// joinReasons gives one line per distinct reason, in a stable order.
func joinReasons(cs []policy.Conflict) string {
	reasons := make([]string, len(cs))
	for i, c := range cs {
		reasons[i] = c.Reason
	}
	return joinStrings(reasons)
}

func joinStrings(s []string) string {
	s = slices.Clone(s)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), "; ")
}
