package repair

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/ops/audit"
)

// announcePlans plans every violation, in their fair order, and tells
// each plan once.
func (r *Repairer) announcePlans(ctx context.Context, p *planner, queue []audit.Violation, st *state, now time.Time) {
	seen := newTold()
	plans := make(map[string]lastPlan, len(r.plans))
	b := newBudget(st, queue, r.cfg.MaxPerHour, now)
	clock := newPassClock(queue, r.cfg.PassTimeout, time.Now)
	planned, last, cut := 0, "", false
	for _, v := range queue {
		vk := violationKey(v)
		prev, known := r.plans[vk]
		// A plan not made again (lasting, or not reached in this pass) is
		// kept as told: telling it again would repeat its Events.
		keep := func() {
			if known && r.announced[prev.key] {
				seen.keys[prev.key] = true
				plans[vk] = prev
			}
		}
		if !cut && (planned == r.cfg.MaxSteps || ctx.Err() != nil) {
			// The next pass begins after the last namespace served.
			r.turns.cursor, cut = last, true
		}
		if cut || (known && now.Sub(prev.at) < replanEvery && r.announced[prev.key]) {
			keep()
			continue
		}
		s, ok := clock.plan(ctx, v.Namespace, func(ctx context.Context) Step { return p.plan(ctx, v) })
		if !ok {
			keep()
			continue
		}
		planned, last = planned+1, v.Namespace
		if s.Action != None {
			if why := r.holdReason(st, b, s, now); why != "" {
				s.Why += "; not now: " + why
			}
		}
		r.announce(p, s, seen)
		plans[vk] = lastPlan{at: now, key: planKey(s)}
	}
	r.plans = plans
	r.forgetExcept(seen)
}

// replanEvery is how long plan mode keeps a lasting violation's plan.
const replanEvery = 5 * time.Minute

// lastPlan is a violation's plan as plan mode last made it.
type lastPlan struct {
	at  time.Time
	key string // planKey
}

func violationKey(v audit.Violation) string {
	return v.Rule + "|" + strings.Join(v.Pods, ",")
}

// planKey names a plan: its violation, action and target, without the
// reason, which may change by the pass (a lag in bytes).
func planKey(s Step) string {
	return violationKey(s.Violation) + "|" + string(s.Action) + "|" + s.Target
}

// announce logs, counts and tells s by an Event on its pods, once while it
// stays the same.
func (r *Repairer) announce(p *planner, s Step, seen *told) {
	// A plan is told again when its action or target changes.
	key := planKey(s)
	seen.keys[key] = true
	if r.announced[key] {
		return
	}
	// Within the caps only; a plan left out is told by a later pass.
	if seen.events >= eventsPerPass || seen.byNamespace[s.Violation.Namespace] >= eventsPerNamespace {
		return
	}
	seen.events++
	seen.byNamespace[s.Violation.Namespace]++
	r.announced[key] = true
	outcome := OutcomePlanned
	if s.Action == None {
		outcome = OutcomeRefused
	}
	r.total.WithLabelValues(string(s.Action), outcome).Inc()
	r.cfg.Log.WithFields(logrus.Fields{"action": s.Action, "target": s.Target, "rule": s.Violation.Rule, "pods": s.Violation.Pods, "why": s.Why}).Info("repair planned")
	note := s.Why
	if s.Action != None {
		note = fmt.Sprintf("would %s %s: %s", s.Action, s.Target, s.Why)
	} else {
		note = "no repair: " + note
	}
	for _, name := range s.Violation.Pods {
		ns, n, _ := strings.Cut(name, "/")
		pod := &model.Pod{Namespace: ns, Name: n}
		if x, ok := p.placed(name); ok {
			pod = x.Pod
		}
		r.event(pod, corev1.EventTypeNormal, ReasonPlanned, s.Action, "%s", note)
	}
}

// told is what one pass announced: the plans it saw, and the Events of
// plans it recorded, in all and by namespace.
type told struct {
	keys        map[string]bool
	events      int
	byNamespace map[string]int
}

func newTold() *told { return &told{keys: map[string]bool{}, byNamespace: map[string]int{}} }

// Caps on the plans one pass announces (two Events each), so that one
// tenant's crowd of violations never floods the API server or its own
// namespace's Events.
const (
	eventsPerPass      = 50
	eventsPerNamespace = 10
)

// forgetExcept keeps, of the steps announced, those seen in this pass.
func (r *Repairer) forgetExcept(seen *told) {
	for k := range r.announced {
		if !seen.keys[k] {
			delete(r.announced, k)
		}
	}
}

// event records an Event on pod, its note cut to the API server's limit.
func (r *Repairer) event(pod *model.Pod, eventType, reason string, action Action, format string, args ...any) {
	if r.cfg.Recorder == nil || pod == nil {
		return
	}
	note := fmt.Sprintf(format, args...)
	if len(note) > audit.MaxNote {
		note = audit.Truncate(note, audit.MaxNote-len("...")) + "..."
	}
	r.cfg.Recorder.Eventf(audit.PodRef(pod), nil, eventType, reason, "Repair/"+string(action), "%s", note)
}
