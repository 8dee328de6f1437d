// Package audit checks the placements already made against the hard rules
// of the active policy: a pod bound before a rule existed, bound while
// regosched was down (ignorable extender), or whose role changed since (a
// Redis failover relabels a replica as master) can break a rule that filter
// would enforce today. Each violation is exported as a gauge
// (regosched_violations{rule,namespace}), announced once to each pod
// involved by a Warning Event (one per pod and pass, naming all its new
// violations, within caps per pass and per namespace), and listed by
// `regosched audit`. The audit changes nothing: the repair (internal/ops/repair)
// acts on its reports, through Config.AfterPass.
//
// A pass judges each bound pod as filter would judge it pending, against
// its peers from the placement cache, and keeps the conflicts on the pod's
// own node. Only pods that share a group and a node with another pod can
// conflict there, so the others cost a map look-up and no Rego: a pass is
// linear in the bound pods and, for the suspects, in their peers. A suspect
// is described by the policy once per version, not once per pass.
//
// Wiring into `regosched serve` (leader only, once the cache has synced):
//
//	a, err := audit.New(audit.Config{
//		Cache: cache, Policies: active.Load, Recorder: recorder,
//		Log: log.WithField("component", "audit"), Registerer: reg,
//	})
//	trigger := make(chan struct{}, 1) // role changes: select { case trigger <- struct{}{}: default: }
//	go a.Loop(ctx, audit.DefaultInterval, trigger)
//
// where recorder is an events.k8s.io/v1 recorder, which needs RBAC to
// create events.events.k8s.io (record.EventRecorderAdapter wraps a
// core/v1 one), on a clientset of its own so that Events never spend the
// request budget (QPS, burst) of binds:
//
//	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: eventsClient.EventsV1()})
//	err := b.StartRecordingToSinkWithContext(ctx) // b.Shutdown() at exit
//	recorder := b.NewRecorder(scheme.Scheme, "regosched")
package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
)

// DefaultInterval is the period of Loop's passes in `regosched serve`.
const DefaultInterval = 60 * time.Second

// EventReason is the reason of the Warning Event on a pod that breaks a rule.
const EventReason = "PlacementViolation"

// EventAction is the action of that Event: it names the rule, so that two
// rules broken by one pair are two event series, not one (the events
// recorder merges events by pod, related pod, reason and action, and keeps
// the first note).
func EventAction(rule string) string { return "Audit/" + rule }

// ErrNoPolicy is returned by Run while no policy is active.
var ErrNoPolicy = policy.ErrNoPolicy

// Placements is what a pass reads of the placement cache (implemented by
// placement.Cache).
type Placements interface {
	// Indexed returns every bound pod that belongs to a group, with its groups.
	Indexed() []placement.Indexed
	// Peers returns the bound pods that share a key with the pod self.
	Peers(keys []string, self types.UID) []*model.Pod
	policy.Cluster
}

// Config configures an Auditor.
type Config struct {
	// Cache holds the bound pods; required.
	Cache Placements
	// Policies gives the policy to judge by (policy.Active.Load); nil while
	// none is active. Required.
	Policies func() *policy.Policy
	// Recorder receives at most one Warning Event per pod and pass, for
	// the violations the pod was not told of; nil records none. Its client
	// should have a request budget of its own: a burst of violations must
	// not hold back binds.
	Recorder events.EventRecorder
	// EventsPerPass caps the Events of one pass, all namespaces together;
	// 0 means DefaultEventsPerPass. Pods left out are told by later passes.
	EventsPerPass int
	// EventsPerNamespace caps the Events of one pass in one namespace (the
	// pod's), so that one crowded tenant does not use up the pass; 0 means
	// DefaultEventsPerNamespace.
	EventsPerNamespace int
	// Log receives one line per new violation and per pass; required.
	Log logrus.FieldLogger
	// Registerer exports the audit's metrics; nil exports none (the CLI).
	Registerer prometheus.Registerer
	// AfterPass, when set, is given the report of each pass of Loop that
	// succeeded (the repair acts on it), before the next pass starts.
	AfterPass func(context.Context, Report)
	// TriggerGap is the least time from the end of a pass to a pass that
	// Loop's trigger asks for, so that a storm of role changes (a tenant
	// flipping labels) costs a pass per gap, not one per change; 0 sets
	// none. regosched serve uses DefaultTriggerGap.
	TriggerGap time.Duration
	// Judged, when set, is told how many of a pass's pods to judge it has
	// judged, once before the first and after each: a pass over a big
	// cluster takes a while, and `regosched audit --progress` says how far
	// it is. It is called on the pass's goroutine and must be cheap.
	Judged func(done, total int)
	// RoleChecked, when set, reports whether the Redis roles controller has
	// read the pod's role (or tried to) since the pod last changed in what
	// the read depends on; the violations of a pod whose role the policy
	// reads from Redis and that is not checked yet go to Report.Waiting.
	// nil: every label is a fact (the CLI).
	RoleChecked func(namespace, name string) bool
}

// Auditor runs audit passes. Create it with New.
type Auditor struct {
	cache    Placements
	policies func() *policy.Policy
	recorder events.EventRecorder
	log      logrus.FieldLogger
	// afterReport is Config.AfterPass.
	afterReport func(context.Context, Report)
	// judged is Config.Judged; nil tells no one.
	judged func(done, total int)
	// eventsPerPass and eventsPerNamespace are Config's caps, defaults applied.
	eventsPerPass, eventsPerNamespace int
	// triggerGap is Config.TriggerGap.
	triggerGap time.Duration
	// roleChecked is Config.RoleChecked.
	roleChecked func(namespace, name string) bool

	violations       *prometheus.GaugeVec
	duration         prometheus.Histogram
	runs             *prometheus.CounterVec
	eventsSuppressed prometheus.Counter

	// mu serialises passes, so that seen is each pass's predecessor's.
	mu sync.Mutex
	// seen holds the violations of the last pass, so that only new ones
	// are logged.
	seen map[pairKey]bool
	// told holds, of the last pass's violations, the sides each pod was
	// told of by an Event, so that a pod is told once while they last.
	told map[side]bool
	// described keeps, for the pods the last pass judged, their description
	// as pending pods: a cached pod is replaced whenever what the policy
	// reads of it changes, so a lasting crowd costs Rego once, not per pass.
	described map[*model.Pod]description
	// afterPass, when set (tests), is called at the end of each Loop pass.
	afterPass func()
}

// Report is the outcome of one pass.
type Report struct {
	// Violations are sorted by rule, namespace, node and pods.
	Violations     []Violation `json:"violations"`
	PolicyRevision string      `json:"policyRevision"`
	// Pods is the number of bound pods checked: those in a policy group.
	Pods int `json:"pods"`
	// Skipped are the pods (namespace/name) the policy failed to judge,
	// sorted; their violations, if any, are unknown.
	Skipped []string `json:"skipped,omitempty"`
	// Waiting are the violations of pods whose role is read from Redis
	// and not read yet (Config.RoleChecked): not reported, announced,
	// counted nor repaired until the read says whether they stand.
	Waiting []Violation `json:"waiting,omitempty"`
}

// Violation is a hard rule broken between pods bound to one node.
type Violation struct {
	Rule string `json:"rule"`
	// Namespace is that of Pods[0].
	Namespace string `json:"namespace"`
	Node      string `json:"node"`
	// Pods are the two pods (namespace/name), sorted.
	Pods []string `json:"pods"`
	// Reason is the rule's reason, as filter would give it for Pods[0]
	// (else for Pods[1]).
	Reason string `json:"reason"`
}

// New returns an Auditor whose metrics are registered on cfg.Registerer.
func New(cfg Config) (*Auditor, error) {
	if cfg.Cache == nil || cfg.Policies == nil || cfg.Log == nil {
		return nil, errors.New("audit: Cache, Policies and Log are required")
	}
	if cfg.EventsPerPass < 0 || cfg.EventsPerNamespace < 0 {
		return nil, fmt.Errorf("audit: EventsPerPass (%d) and EventsPerNamespace (%d) must not be negative",
			cfg.EventsPerPass, cfg.EventsPerNamespace)
	}
	a := &Auditor{
		cache:              cfg.Cache,
		policies:           cfg.Policies,
		recorder:           cfg.Recorder,
		log:                cfg.Log,
		afterReport:        cfg.AfterPass,
		judged:             cfg.Judged,
		eventsPerPass:      cmp.Or(cfg.EventsPerPass, DefaultEventsPerPass),
		eventsPerNamespace: cmp.Or(cfg.EventsPerNamespace, DefaultEventsPerNamespace),
		triggerGap:         cfg.TriggerGap,
		roleChecked:        cfg.RoleChecked,
		violations: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "regosched_violations",
			Help: "Pairs of bound pods that break a hard placement rule on their node, by rule and namespace, as of the last audit pass.",
		}, []string{"rule", "namespace"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "regosched_audit_duration_seconds",
			Help:    "Time an audit pass of every bound pod took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9), // 1ms .. ~65s
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_audit_runs_total",
			Help: "Audit passes: success, partial (the policy failed on some pods, logged) or error (no result).",
		}, []string{"result"}),
		eventsSuppressed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regosched_audit_events_suppressed_total",
			Help: "Warning Events of placement violations an audit pass left out because it reached its cap per pass or per namespace; the pods concerned are told by a later pass while their violations last.",
		}),
		seen: map[pairKey]bool{},
		told: map[side]bool{},
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{a.violations, a.duration, a.runs, a.eventsSuppressed} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering audit metrics: %w", err)
			}
		}
	}
	return a, nil
}
