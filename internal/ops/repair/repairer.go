package repair

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

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
	// turns keeps the passes' order fair among namespaces and clusters.
	turns turns
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
		store: store{kube: cfg.Kube, namespace: cfg.Namespace, name: cfg.ConfigMap, log: cfg.Log, metrics: newStateMetrics()},
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
		if err := r.store.metrics.register(cfg.Registerer); err != nil {
			return nil, err
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

	// Ordered each pass, a repair in flight or not, so that the time a
	// violation was first seen stays known.
	queue := r.turns.order(report.Violations, p.clusterOf, now)
	if r.cfg.Mode == Plan {
		r.announcePlans(ctx, p, queue, st, now)
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
	r.start(ctx, actCtx, p, queue, st, now)
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
