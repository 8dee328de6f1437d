package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/audit"
)

// Config configures a Repairer.
type Config struct {
	Mode Mode
	// Cache is the placement cache the audit judged; required.
	Cache audit.Placements
	// Policies gives the active policy; required.
	Policies func() *policy.Policy
	// Kube reads pods and PodDisruptionBudgets, evicts, and keeps the
	// state ConfigMap; required.
	Kube kubernetes.Interface
	// Redis reaches Redis pods; nil (no --redis-roles) plans Redis repairs
	// but never acts on them: nothing could confirm the roles.
	Redis Redis
	// Contact is nil while the API server answers (apicontact.Watch.Err);
	// nil Contact: always.
	Contact func() error
	// Recorder receives RepairPlanned, Repaired and RepairFailed Events;
	// nil records none.
	Recorder events.EventRecorder
	// Namespace and ConfigMap name the state's ConfigMap.
	Namespace, ConfigMap string
	// MaxPerHour caps the actions sent in any hour, all clusters together.
	MaxPerHour int
	// Timeout is how long an action's violation may last before the
	// repair is given up.
	Timeout time.Duration
	// Cooldown is the least time between a role change in a cluster (seen,
	// or sent) and a failover regosched sends there.
	Cooldown time.Duration
	// MaxLagBytes is how far behind its master a replica may be and still
	// take over.
	MaxLagBytes int64
	// MaxSteps bounds the violations planned in one pass (100 when 0).
	MaxSteps int
	// PassTimeout bounds the planning of one pass (30 s when 0): a Redis
	// that answers slowly, or not at all, must not hold the audit's loop.
	// The action itself, once started, gets a timeout of its own.
	PassTimeout time.Duration
	Log         logrus.FieldLogger
	Registerer  prometheus.Registerer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Repairer acts on the audit's reports. Create it with New.
type Repairer struct {
	cfg   Config
	store store
	total *prometheus.CounterVec

	mu sync.Mutex
	// announced holds the steps told by Event and counted, by violation
	// and plan, so that a lasting plan is told once.
	announced map[string]bool
	// roles holds each pod's role labels of the last pass, to see
	// failovers between passes; generation counts the passes.
	roles      map[types.UID]seenRole
	generation uint64
	// plans holds, in plan mode, each lasting violation's last plan, made
	// again only after replanEvery: planning costs API reads and Redis
	// probes, which a violation that lasts for days must not spend each
	// pass from the budget the role labels need.
	plans map[string]lastPlan
}

// New checks cfg and registers the metric.
func New(cfg Config) (*Repairer, error) {
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return nil, err
	}
	if cfg.Cache == nil || cfg.Policies == nil || cfg.Kube == nil || cfg.Log == nil {
		return nil, errors.New("repair: Cache, Policies, Kube and Log are required")
	}
	if cfg.MaxPerHour < 0 || cfg.Timeout < 0 || cfg.Cooldown < 0 || cfg.MaxLagBytes < 0 {
		return nil, fmt.Errorf("repair: negative limits (max per hour %d, timeout %s, cooldown %s, max lag %d)",
			cfg.MaxPerHour, cfg.Timeout, cfg.Cooldown, cfg.MaxLagBytes)
	}
	if cfg.Namespace == "" {
		return nil, errors.New("repair: the namespace of the state ConfigMap is required")
	}
	if cfg.ConfigMap == "" {
		cfg.ConfigMap = DefaultConfigMap
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 100
	}
	if cfg.PassTimeout <= 0 {
		cfg.PassTimeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Repairer{
		cfg:   cfg,
		store: store{kube: cfg.Kube, namespace: cfg.Namespace, name: cfg.ConfigMap},
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_repairs_total",
			Help: "Repairs of placement violations, by action (failover, evict, none) and outcome: planned and refused (a plan first seen, with or without an action), started (the action was sent), repaired (its violation cleared), failed (the action failed or the violation outlived --repair-timeout).",
		}, []string{"action", "outcome"}),
		announced: map[string]bool{},
		roles:     map[types.UID]seenRole{},
		plans:     map[string]lastPlan{},
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.total); err != nil {
			return nil, fmt.Errorf("registering repair metrics: %w", err)
		}
	}
	return r, nil
}

// Steps returns the repair of each violation of report as it stands,
// acting on nothing and writing nothing: `regosched audit --plan`, where
// Redis is not asked (r may be nil).
func Steps(ctx context.Context, pol *policy.Policy, cache audit.Placements, kube kubernetes.Interface, r Redis, maxLag int64, report audit.Report) []Step {
	p := newPlanner(pol, cache, r, kube, maxLag)
	steps := make([]Step, 0, len(report.Violations))
	for _, v := range report.Violations {
		steps = append(steps, p.plan(ctx, v))
	}
	return steps
}

// Pass is called after each audit pass of the leader, with its report.
// In plan mode it announces each violation's repair; in on mode it
// follows up the repair in flight, or starts one.
func (r *Repairer) Pass(ctx context.Context, report audit.Report) {
	if r.cfg.Mode == Off {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	log := r.cfg.Log
	if r.cfg.Contact != nil {
		if err := r.cfg.Contact(); err != nil {
			log.WithError(err).Warn("repair: skipped, the API server is not in reach")
			return
		}
	}
	pol := r.cfg.Policies()
	if pol == nil {
		return
	}
	now := r.cfg.Now()
	// The action and its records keep the caller's context: once sent,
	// it is written down whatever the planning took.
	actCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, r.cfg.PassTimeout)
	defer cancel()
	st, err := r.store.load(ctx)
	if err != nil {
		log.WithError(err).Error("repair: skipped, the repair state cannot be read")
		return
	}
	p := newPlanner(pol, r.cfg.Cache, r.cfg.Redis, r.cfg.Kube, r.cfg.MaxLagBytes)
	changed := r.seeFailovers(p, st, now)
	keep := max(time.Hour, r.cfg.Cooldown, r.cfg.Timeout)
	st.prune(now, keep)

	if r.cfg.Mode == Plan {
		r.announcePlans(ctx, p, report, st, now)
		return
	}
	if st.InFlight != nil {
		if r.follow(st, report, now) {
			r.save(actCtx, st, "the end of a repair")
		}
		return
	}
	if changed {
		r.save(actCtx, st, "the role changes seen")
	}
	r.start(ctx, actCtx, p, report, st, now)
}

// seeFailovers records, in st, the clusters whose role labels changed
// since the last pass; it reports whether any did. It walks every placed
// pod, so it keeps one entry per pod across passes and allocates nothing
// for a pod whose role stayed.
func (r *Repairer) seeFailovers(p *planner, st *state, now time.Time) bool {
	if !p.liveOK {
		return false
	}
	r.generation++
	changed := false
	for _, x := range p.indexed {
		role, shard := p.roleOf(x.Pod)
		if role == "" {
			continue
		}
		cur := seenRole{role: role, shard: shard, generation: r.generation}
		if prev, ok := r.roles[x.Pod.UID]; ok && (prev.role != role || prev.shard != shard) {
			for _, k := range x.Keys {
				st.rolesChanged(k, now)
			}
			changed = true
		}
		r.roles[x.Pod.UID] = cur
	}
	for uid, s := range r.roles {
		if s.generation != r.generation {
			delete(r.roles, uid) // gone, or no longer labelled
		}
	}
	return changed
}

// seenRole is a pod's role labels as a pass saw them.
type seenRole struct {
	role, shard string
	generation  uint64
}

// holdReason says why no action may start in cluster now, or "".
func (r *Repairer) holdReason(st *state, s Step, now time.Time) string {
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
	if n := st.startedWithin(now, time.Hour); n >= r.cfg.MaxPerHour {
		return fmt.Sprintf("%d repairs were started in the last hour, the most --repair-max-per-hour allows", n)
	}
	return ""
}

// start plans the violations in order and starts the first repair that
// may act.
func (r *Repairer) start(ctx, actCtx context.Context, p *planner, report audit.Report, st *state, now time.Time) {
	seen := newTold()
	for i, v := range report.Violations {
		if i == r.cfg.MaxSteps || ctx.Err() != nil {
			break
		}
		s := p.plan(ctx, v)
		if s.Action == None {
			r.announce(p, s, seen)
			continue
		}
		if s.redis && !s.Checked {
			r.announce(p, none(s, "roles are not read from Redis here (--redis-roles is off): nothing can confirm them"), seen)
			continue
		}
		if why := r.holdReason(st, s, now); why != "" {
			r.announce(p, none(s, "%s", why), seen)
			continue
		}
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
		log.WithError(err).Warn("repair: not started, its record cannot be written")
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
		st.Done = append(st.Done, record{Cluster: f.Cluster, Action: f.Action, Target: f.Target, Outcome: OutcomeRepaired, Started: f.Started, Ended: now})
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
	st.Done = append(st.Done, record{Cluster: f.Cluster, Action: f.Action, Target: f.Target, Outcome: OutcomeFailed, Started: f.Started, Ended: now})
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

func (r *Repairer) save(ctx context.Context, st *state, what string) {
	if err := r.store.save(ctx, st); err != nil {
		r.cfg.Log.WithError(err).Warn("repair: cannot record " + what + "; the next pass tries again")
	}
}

// announcePlans plans every violation and tells each plan once.
func (r *Repairer) announcePlans(ctx context.Context, p *planner, report audit.Report, st *state, now time.Time) {
	seen := newTold()
	plans := make(map[string]lastPlan, len(r.plans))
	for i, v := range report.Violations {
		if i == r.cfg.MaxSteps || ctx.Err() != nil {
			break
		}
		vk := violationKey(v)
		if last, ok := r.plans[vk]; ok && now.Sub(last.at) < replanEvery && r.announced[last.key] {
			seen.keys[last.key] = true
			plans[vk] = last
			continue
		}
		s := p.plan(ctx, v)
		if s.Action != None {
			if why := r.holdReason(st, s, now); why != "" {
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

// actionTimeout bounds the sending of one action (the command or the
// eviction, not its effect, which --repair-timeout bounds).
const actionTimeout = 10 * time.Second
