package repair

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/ops/audit"
)

// holdReason says why no action may start in cluster now, or "".
func (r *Repairer) holdReason(st *state, b budget, s Step, now time.Time) string {
	if b, ok := st.Backoff[s.Cluster]; ok && now.Before(b.Until) {
		return fmt.Sprintf("the last repair of %s failed (%d in a row): backing off until %s", s.Cluster, b.Failures, b.Until.UTC().Format(time.RFC3339))
	}
	if s.Action == Failover {
		// Within the vote window Redis would give the failover up unseen.
		cooldown := max(r.cfg.Cooldown, s.settle)
		if t, ok := st.Failovers[s.Cluster]; ok && now.Sub(t) < cooldown {
			return fmt.Sprintf("roles changed in %s %s ago, within the cooldown of %s", s.Cluster, now.Sub(t).Round(time.Second), cooldown)
		}
	}
	return b.hold(namespaceOf(s))
}

// start plans the violations in their fair order (turns.order), each
// namespace within its share of the pass, and starts the first repair
// that may act.
func (r *Repairer) start(ctx, actCtx context.Context, p *planner, queue []audit.Violation, st *state, now time.Time) {
	seen := newTold()
	b := newBudget(st, queue, r.cfg.MaxPerHour, now)
	clock := newPassClock(queue, r.cfg.PassTimeout, time.Now)
	planned, last := 0, ""
	for _, v := range queue {
		if planned == r.cfg.MaxSteps || ctx.Err() != nil {
			// Cut short: the next pass begins after the last served.
			r.turns.cursor = last
			break
		}
		s, ok := clock.plan(ctx, v.Namespace, func(ctx context.Context) Step { return p.plan(ctx, v) })
		if !ok {
			continue
		}
		planned, last = planned+1, v.Namespace
		if s.Action == None {
			r.announce(p, s, seen)
			continue
		}
		if s.redis && !s.Checked {
			r.announce(p, none(s, "roles are not read from Redis here (--redis-roles is off): nothing can confirm them"), seen)
			continue
		}
		if why := r.holdReason(st, b, s, now); why != "" {
			r.announce(p, none(s, "%s", why), seen)
			continue
		}
		r.turns.cursor = v.Namespace
		r.act(actCtx, s, st, now)
		r.forgetExcept(seen)
		return
	}
	r.forgetExcept(seen)
}

// act writes the repair as in flight, then sends its action.
func (r *Repairer) act(ctx context.Context, s Step, st *state, now time.Time) {
	log := r.cfg.Log.WithFields(logrus.Fields{"action": s.Action, "target": s.Target, "cluster": s.Cluster, "rule": s.Violation.Rule, "pods": s.Violation.Pods})
	st.InFlight = &inFlight{Cluster: s.Cluster, Action: s.Action, Target: s.Target, TargetUID: s.target.UID,
		Violation: violationRecord{Rule: s.Violation.Rule, Pods: s.Violation.Pods}, Started: now}
	if s.Action == Failover {
		st.rolesChanged(s.Cluster, now)
	}
	// Written before the action: a leader that dies after sending it
	// leaves a record, and its successor never sends it again.
	if err := r.store.save(ctx, st); err != nil {
		// The store logged and counted the failure; this says what waits.
		log.WithError(err).Debug("repair: not started, its record cannot be written")
		return
	}
	r.event(s.target, corev1.EventTypeNormal, ReasonPlanned, s.Action, "starting: %s", s.Why)
	log.WithField("why", s.Why).Info("repair started")
	var err error
	sendCtx, cancel := context.WithTimeout(ctx, actionTimeout)
	switch s.Action {
	case Failover:
		err = failover(sendCtx, r.cfg.Redis, s.target)
	case Evict:
		err = evict(sendCtx, r.cfg.Kube, s.target, false)
	}
	cancel()
	if err != nil {
		r.fail(st, now, fmt.Sprintf("%s of %s failed: %v", s.Action, s.Target, err), s.target)
		r.save(ctx, st, "a failed repair")
		return
	}
	r.total.WithLabelValues(string(s.Action), OutcomeStarted).Inc()
}

// follow checks the repair in flight against report; it reports whether
// the repair ended (st changed).
func (r *Repairer) follow(st *state, report audit.Report, now time.Time) bool {
	f := st.InFlight
	target := f.target()
	log := r.cfg.Log.WithFields(logrus.Fields{"action": f.Action, "target": f.Target, "cluster": f.Cluster})
	cleared := !slices.ContainsFunc(report.Violations, func(v audit.Violation) bool {
		return v.Rule == f.Violation.Rule && slices.Equal(v.Pods, f.Violation.Pods)
	}) && !slices.ContainsFunc(f.Violation.Pods, func(p string) bool { return slices.Contains(report.Skipped, p) })
	switch {
	case cleared:
		took := now.Sub(f.Started)
		r.total.WithLabelValues(string(f.Action), OutcomeRepaired).Inc()
		r.event(target, corev1.EventTypeNormal, ReasonRepaired, f.Action, "%s of %s cleared the violation of %s between %s after %s",
			f.Action, f.Target, f.Violation.Rule, strings.Join(f.Violation.Pods, " and "), took.Round(time.Second))
		log.WithField("took", took).Info("repaired")
		st.Done = append(st.Done, f.ended(OutcomeRepaired, now))
		delete(st.Backoff, f.Cluster)
		st.InFlight = nil
		return true
	case now.Sub(f.Started) > r.cfg.Timeout:
		r.fail(st, now, fmt.Sprintf("the violation of %s between %s outlived the %s timeout after %s of %s",
			f.Violation.Rule, strings.Join(f.Violation.Pods, " and "), r.cfg.Timeout, f.Action, f.Target), target)
		return true
	}
	log.Debug("repair in flight")
	return false
}

// fail ends the repair in flight as failed, counts and tells it, and
// backs its cluster off.
func (r *Repairer) fail(st *state, now time.Time, why string, target *model.Pod) {
	f := st.InFlight
	r.total.WithLabelValues(string(f.Action), OutcomeFailed).Inc()
	r.cfg.Log.WithFields(logrus.Fields{"cluster": f.Cluster, "target": f.Target}).Warn("repair failed: " + why)
	r.event(target, corev1.EventTypeWarning, ReasonFailed, f.Action, "%s", why)
	st.Done = append(st.Done, f.ended(OutcomeFailed, now))
	if st.Backoff == nil {
		st.Backoff = map[string]backoff{}
	}
	b := st.Backoff[f.Cluster]
	b.Failures++
	base := max(r.cfg.Cooldown, r.cfg.Timeout)
	wait := base << min(b.Failures-1, 4)
	b.Until = now.Add(min(wait, 24*time.Hour))
	st.Backoff[f.Cluster] = b
	st.InFlight = nil
}

// ended is the record of f ended at now with outcome.
func (f *inFlight) ended(outcome string, now time.Time) record {
	return record{Cluster: f.Cluster, Action: f.Action, Target: f.Target, Outcome: outcome, Started: f.Started, Ended: now}
}

// save writes st; a failure is logged, counted and alerted on by the
// store, and the next pass tries again.
func (r *Repairer) save(ctx context.Context, st *state, what string) {
	if err := r.store.save(ctx, st); err != nil {
		r.cfg.Log.WithError(err).Debug("repair: cannot record " + what + "; the next pass tries again")
	}
}

// actionTimeout bounds the sending of one action (the command or the
// eviction, not its effect, which --repair-timeout bounds).
const actionTimeout = 10 * time.Second
