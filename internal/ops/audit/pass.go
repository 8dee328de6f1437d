package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// description is a pod described as pending under a policy.
type description struct {
	policy *policy.Policy
	keys   []string
	claims *model.Claims
}

// pairKey names a violation across passes: a rule and its pods, sorted
// (b is "" when the rule named no peer).
type pairKey struct{ rule, a, b string }

// found is a violation being collected: its pods, and the reason each side
// gave (the reason for pods[0] names pods[1], and the other way round).
type found struct {
	pods    [2]*model.Pod
	reasons [2]string
}

// Run checks every bound pod once, updates the metrics, tells the pods of
// the violations they were not told of by an Event each (announce), and
// returns what it found, complete whatever the caps on Events. Passes are
// serialised.
func (a *Auditor) Run(ctx context.Context) (Report, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	start := time.Now()
	pol := a.policies()
	if pol == nil {
		a.runs.WithLabelValues("error").Inc()
		return Report{}, ErrNoPolicy
	}
	all, pods, skipped, err := a.pass(ctx, pol)
	a.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		a.runs.WithLabelValues("error").Inc()
		return Report{}, err
	}
	all, held := a.holdWaiting(ctx, pol, all)
	report := Report{
		Violations:     make([]Violation, 0, len(all)),
		PolicyRevision: pol.Revision(),
		Pods:           pods,
		Skipped:        skipped,
	}
	for _, c := range all {
		report.Violations = append(report.Violations, c.violation)
	}
	for _, c := range held {
		report.Waiting = append(report.Waiting, c.violation)
	}
	a.publish(all, skipped)
	result := "success"
	if len(skipped) > 0 {
		result = "partial"
	}
	a.runs.WithLabelValues(result).Inc()
	a.log.WithFields(logrus.Fields{
		"violations": len(report.Violations), "pods": report.Pods, "skipped": len(skipped), "waiting": len(held),
		"policyRevision": report.PolicyRevision, "took": time.Since(start),
	}).Debug("audit pass")
	return report, nil
}

// collected is a violation of one pass, with what announcing it needs.
type collected struct {
	key       pairKey
	violation Violation
	found     *found
}

// pass judges every suspect pod and returns the violations, sorted, the
// number of pods looked at, and the pods it could not judge.
func (a *Auditor) pass(ctx context.Context, pol *policy.Policy) ([]collected, int, []string, error) {
	indexed := a.cache.Indexed()
	// A conflict needs a peer, and a peer shares a group: count the bound
	// pods of each group, so that only pods sharing one with another are
	// judged. Per group, not per node: a rule per zone, or a quorum, is
	// broken by peers on other nodes.
	crowd := make(map[string]int, len(indexed))
	for _, x := range indexed {
		if x.Pod.Node != "" {
			for _, k := range x.Keys {
				crowd[k]++
			}
		}
	}
	// The suspects are listed before any is judged, so that progress can
	// be told as a share of them.
	var suspects []*model.Pod
	for _, x := range indexed {
		if x.Pod.Node != "" && slices.ContainsFunc(x.Keys, func(k string) bool { return crowd[k] > 1 }) {
			suspects = append(suspects, x.Pod)
		}
	}
	byKey := map[pairKey]*found{}
	var skipped []string
	described := map[*model.Pod]description{}
	// Kept even when the pass fails: what it described is still right.
	defer func() { a.described = described }()
	a.tellJudged(0, len(suspects))
	for i, pod := range suspects {
		if err := ctx.Err(); err != nil {
			return nil, 0, nil, fmt.Errorf("audit pass: %w", err)
		}
		if err := a.judge(ctx, pol, pod, described, byKey); err != nil {
			a.log.WithError(err).WithField("pod", pod.Key()).Warn("audit: the policy could not judge a bound pod")
			skipped = append(skipped, pod.Key())
		}
		a.tellJudged(i+1, len(suspects))
	}
	slices.Sort(skipped)
	out := make([]collected, 0, len(byKey))
	for k, f := range byKey {
		out = append(out, collected{key: k, violation: f.violation(k), found: f})
	}
	slices.SortFunc(out, func(x, y collected) int { return compareViolations(x.violation, y.violation) })
	return out, len(indexed), skipped, nil
}

// tellJudged passes a pass's progress on to Config.Judged, if set.
func (a *Auditor) tellJudged(done, total int) {
	if a.judged != nil {
		a.judged(done, total)
	}
}

// judge adds to byKey the conflicts pod has on its own node: it is
// described as a pending pod (what it avoids), as filter would describe
// it, and joined with its peers as they are cached. Its description goes
// to described.
func (a *Auditor) judge(ctx context.Context, pol *policy.Policy, pod *model.Pod,
	described map[*model.Pod]description, byKey map[pairKey]*found) error {
	// Off the request path, nothing else bounds a policy that loops.
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	d, ok := a.described[pod]
	if !ok || d.policy != pol {
		keys, described, err := judge.DescribeStand(ctx, pol, pod)
		if err != nil {
			return err
		}
		d = description{policy: pol, keys: keys, claims: described}
	}
	described[pod] = d
	conflicts, peers, err := judge.Stand(ctx, pol, a.cache, pod, d.keys, d.claims, nil)
	if err != nil {
		return err
	}
	for _, c := range conflicts {
		i := slices.IndexFunc(peers, func(p *model.Pod) bool { return p.UID == c.Peer })
		if i < 0 {
			continue // the join names only peers of its input
		}
		peer := peers[i]
		k, side := keyOf(c.Rule, pod, peer)
		f := byKey[k]
		if f == nil {
			f = &found{}
			f.pods[side], f.pods[1-side] = pod, peer
			byKey[k] = f
		}
		// Several conflicts of one rule between one pair keep the first
		// reason in the policy's canonical order.
		if f.reasons[side] == "" {
			f.reasons[side] = c.Reason
		}
	}
	return nil
}

// keyOf returns the key of the pair (pod, peer) under rule, and which of
// the key's pods pod is (0 or 1).
func keyOf(rule string, pod, peer *model.Pod) (pairKey, int) {
	a, b := pod.Key(), peer.Key()
	if b < a {
		return pairKey{rule: rule, a: b, b: a}, 1
	}
	return pairKey{rule: rule, a: a, b: b}, 0
}

// violation is the violation f found: on the node of its first pod (by
// name), whichever was judged first, so that a pair on two nodes of one
// zone is reported alike by every pass.
func (f *found) violation(k pairKey) Violation {
	v := Violation{Rule: k.rule, Namespace: f.pods[0].Namespace, Node: f.pods[0].Node, Pods: []string{k.a, k.b}, Reason: f.reasons[0]}
	if v.Reason == "" {
		v.Reason = f.reasons[1]
	}
	return v
}

func compareViolations(x, y Violation) int {
	return cmp.Or(strings.Compare(x.Rule, y.Rule), strings.Compare(x.Namespace, y.Namespace),
		strings.Compare(x.Node, y.Node), slices.Compare(x.Pods, y.Pods), strings.Compare(x.Reason, y.Reason))
}
