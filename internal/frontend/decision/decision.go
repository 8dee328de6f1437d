// Package decision turns the active policy's verdicts about a pending pod and
// its peers into kube-scheduler extender results.
//
// Rego sees only the pending pod and its peers and answers per peer node;
// the work proportional to the number of candidate nodes (which may be
// thousands) is plain Go over node names. Files are split by extension point,
// as in kube-scheduler's plugins: filter.go, prioritize.go.
package decision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/ops/shadow"
)

// ErrNoPolicy is returned while no policy is active: the judge's.
var ErrNoPolicy = judge.ErrNoPolicy

// Placements is the view of the cluster that decisions need (implemented by
// placement.Cache).
type Placements interface {
	// Peers, NodeLabels, PodByUID and Assume are what the judge uses.
	judge.Placements
	// Reserve marks a pod that passed filter under policy by as in flight
	// for ttl.
	Reserve(pod *model.Pod, keys []string, ttl time.Duration, by *model.Origin)
	// Reserved returns an in-flight pod, its keys and the policy that
	// decided it.
	Reserved(uid types.UID) (pod *model.Pod, keys []string, by *model.Origin, ok bool)
	// Unassume takes back an Assume whose binding failed.
	Unassume(pod *model.Pod)
	// ExpireAssumed takes back an Assume after ttl unless the informer has
	// confirmed it by then, for a binding whose outcome is unknown.
	ExpireAssumed(pod *model.Pod, ttl time.Duration)
	// WaitForPeers waits until no peer sharing keys is in flight, or ctx ends.
	WaitForPeers(ctx context.Context, keys []string, self types.UID) (time.Duration, []*model.Pod)
}

// Options tune the Decider.
type Options struct {
	// InFlightTTL bounds how long a pod that passed filter holds its peers
	// back while its binding is not seen. Default placement.DefaultInFlightTTL.
	InFlightTTL time.Duration
	// MaxWait bounds how long a filter call waits for in-flight peers; keep
	// it well under the scheduler's httpTimeout (5s by default). Zero turns
	// in-flight tracking off: decisions then trust the informer alone, which
	// breaks rules under bursts unless the bind verb catches it.
	MaxWait time.Duration
	// Client binds pods (bind verb) and reads pods unknown to the cache.
	Client kubernetes.Interface
	// Pending, if set, holds pending pods described before their filter
	// call (placement.Pending); filter describes the others itself.
	Pending PendingViews
	// Recorder, if set, takes the Events of the pods for which the rules
	// per zone yield (judge.Yielded).
	Recorder events.EventRecorder
	// SchedulerName is the profile regosched serves: bind refuses a pod of
	// another scheduler, and filter reserves only its pending pods. Empty:
	// no pod can be told to be the profile's, so filter reserves none and
	// bind refuses every pod.
	SchedulerName string
	// EvalTimeout bounds the policy's evaluations for one verb request,
	// counted from its start (an in-flight wait included), so that a policy
	// that loops on a pod is answered with an error before the scheduler's
	// httpTimeout (5s by default) rather than evaluated for as long as the
	// caller waits. Default DefaultEvalTimeout.
	EvalTimeout time.Duration
	// FilterReadRate (per second) and FilterReadBurst bound the API reads
	// of all filter calls together that ask whether a pod the informer
	// does not know is the profile's pending pod, so that a flood of
	// forged filter calls cannot spend the client's rate limit that binds
	// need. Defaults DefaultFilterReadRate and DefaultFilterReadBurst.
	FilterReadRate  float64
	FilterReadBurst int
	// RefreshReadRate (per second) and RefreshReadBurst bound, on a budget
	// of their own, the re-reads of the peers that refuse every node to a
	// verified pending pod: forged calls never reach it, and a pod freed
	// by a deletion finds it even after a burst of refusals. Defaults
	// DefaultRefreshReadRate and DefaultRefreshReadBurst.
	RefreshReadRate  float64
	RefreshReadBurst int
	// Nodes, if set, gives bind the node it checks a pod's node selector,
	// required node affinity and tolerations against; nil reads the node
	// from the API at each such check.
	Nodes NodeSource
	// Recall, if set, gives the labels a pending pod is decided with when
	// they are not its own (ok): its own plus those it lacks that are
	// remembered of its identity (the last known Redis role of a pod
	// recreated under the same name, which its labels get only once
	// redisroles has written them).
	Recall func(ctx context.Context, pod *v1.Pod) (labels model.Labels, ok bool)
	// SoftInFilter folds the soft rules into filter: of the candidates no
	// hard rule turns away, filter keeps only those of the lowest total
	// penalty (all of them when the totals are equal) and reports the
	// others as unresolvable, with their penalty. kube-scheduler's own
	// scores then choose among the nodes kept, and the scheduler needs no
	// prioritize call: one HTTP round trip and one node list less per pod.
	SoftInFilter bool
	// Shadow, if set, is offered a copy of every filter judgement with
	// peers, to judge again under a policy that is never enforced; nil
	// (the default) judges nothing twice.
	Shadow shadow.Offerer
	// DecisionLog, if set, is given an event for every filter,
	// prioritize, preempt and bind decision (see decisionlog.go); nil (the
	// default) builds none and reads no clock for it.
	DecisionLog DecisionLog
}

// DecisionLog takes decision log events (implemented by
// decisionlog.Logger). Enqueue must not block: it is called on the verb's
// goroutine, before the answer is written.
type DecisionLog interface {
	Enqueue(decisionlog.Event) bool
}

// Defaults of Options.
const (
	// DefaultEvalTimeout is under the scheduler's 5s httpTimeout, with room
	// for the answer to travel; a sane policy evaluates in microseconds.
	DefaultEvalTimeout = 3 * time.Second
	// DefaultFilterReadRate and DefaultFilterReadBurst leave most of the
	// verbs client's rate limit (50 per second by default) to binds: the
	// scheduler's own filter calls read only in races with the informers.
	DefaultFilterReadRate  = 5
	DefaultFilterReadBurst = 20
	// DefaultRefreshReadRate and DefaultRefreshReadBurst are the judge's:
	// it applies them to zero values.
	DefaultRefreshReadRate  = judge.DefaultRefreshRate
	DefaultRefreshReadBurst = judge.DefaultRefreshBurst
)

// ErrEvalTimeout wraps the error of a request whose policy evaluations
// did not end within Options.EvalTimeout.
var ErrEvalTimeout = errors.New("the policy's evaluation exceeded its deadline")

// errEvalDeadline is the cause of a request's evaluation context ending at
// its deadline, as opposed to the caller leaving.
var errEvalDeadline = errors.New("policy evaluation deadline")

// PendingViews gives what was worked out for a pending pod ahead of its
// filter call (implemented by placement.Pending).
type PendingViews interface {
	// Is reports whether pod is, as the API server last said, a pending pod
	// of the profile: the same UID, namespace, name, labels and priority.
	Is(pod *model.Pod) bool
	// Described, what the judge reads of pods described ahead.
	judge.Described
}

// Policies gives the policy to decide with; nil while none is active.
type Policies interface {
	Load() *policy.Policy
}

// Decider answers the extender verbs.
type Decider struct {
	placements Placements
	policies   Policies
	log        logrus.FieldLogger
	opts       Options
	// filterReads is the budget of the reads that verify a pending pod
	// (the judge has the re-reads of its peers).
	filterReads flowcontrol.RateLimiter
	judge       *judge.Judge
	scores      *scoreCache
	totals      judge.Totals
	waits       prometheus.Histogram
	binds       *prometheus.CounterVec
}

// New returns a Decider whose metrics are registered on reg.
func New(placements Placements, policies Policies, log logrus.FieldLogger, reg prometheus.Registerer, opts Options) (*Decider, error) {
	if opts.InFlightTTL <= 0 {
		opts.InFlightTTL = placement.DefaultInFlightTTL
	}
	if opts.MaxWait > opts.InFlightTTL {
		// Waiting longer than a reservation lives is pointless.
		opts.MaxWait = opts.InFlightTTL
	}
	if opts.EvalTimeout <= 0 {
		opts.EvalTimeout = DefaultEvalTimeout
	}
	if opts.FilterReadRate <= 0 {
		opts.FilterReadRate = DefaultFilterReadRate
	}
	if opts.FilterReadBurst <= 0 {
		opts.FilterReadBurst = DefaultFilterReadBurst
	}
	d := &Decider{
		placements:  placements,
		policies:    policies,
		log:         log,
		opts:        opts,
		filterReads: flowcontrol.NewTokenBucketRateLimiter(float32(opts.FilterReadRate), opts.FilterReadBurst),
		scores:      newScoreCache(opts.InFlightTTL),
		waits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "regosched_inflight_wait_seconds",
			Help:    "Time a filter call waited for peers that passed filter but whose binding was not yet seen.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 10), // 0.5ms .. ~2s
		}),
		binds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_binds_total",
			Help: "Bind verb outcomes: bound, refused (a hard rule would break), error, uncertain (the binding call failed and its outcome could not be read; the placement is kept until the informer confirms it or the in-flight TTL passes).",
		}, []string{"outcome"}),
	}
	if err := d.newJudge(reg); err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{d.waits, d.binds} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering decision metrics: %w", err)
		}
	}
	return d, nil
}

// newJudge makes the judge of d's options, its metrics registered on reg.
func (d *Decider) newJudge(reg prometheus.Registerer) error {
	opts := d.opts
	cfg := judge.Config{
		Placements: d.placements, Policies: d.policies, Client: opts.Client, Recall: opts.Recall,
		RefreshRate: opts.RefreshReadRate, RefreshBurst: opts.RefreshReadBurst, Recorder: opts.Recorder,
		Registerer: reg, Log: d.log,
	}
	if opts.Pending != nil { // not a typed nil in the interface
		cfg.Ahead = opts.Pending
	}
	j, err := judge.New(cfg)
	if err != nil {
		return err
	}
	d.judge = j
	return nil
}

// evalContext bounds the policy's evaluations of one request.
func (d *Decider) evalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d.opts.EvalTimeout, errEvalDeadline)
}

// evalError says, of err from a request whose evaluations ran under ectx,
// that the policy took too long on pod when ectx's deadline ended it.
func (d *Decider) evalError(ectx context.Context, pod *v1.Pod, err error) error {
	if err == nil || !errors.Is(context.Cause(ectx), errEvalDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("pod %s/%s: %w (%v): %w", pod.Namespace, pod.Name, ErrEvalTimeout, d.opts.EvalTimeout, err)
}

// waitForPeers waits, bounded by MaxWait, for s's peers still in flight:
// the extender's filter calls may come before the binds of the peers the
// scheduler placed just before.
func (d *Decider) waitForPeers(ctx context.Context, s *judge.Subject) {
	ctx, cancel := context.WithTimeout(ctx, d.opts.MaxWait)
	defer cancel()
	waited, pending := d.placements.WaitForPeers(ctx, s.Keys, s.Pod.UID)
	d.waits.Observe(waited.Seconds())
	if len(pending) > 0 {
		// Deciding now may miss where those peers land; with the bind verb
		// configured the commit-time check still catches it.
		names := make([]string, len(pending))
		for i, p := range pending {
			names[i] = p.Key()
		}
		d.log.WithFields(logrus.Fields{
			"pod": s.Pod.Key(), "waited": waited, "inFlight": names,
		}).Warn("peers still in flight after the wait limit; deciding without them")
	}
}

// candidateNames lists the candidate nodes of args in order, from NodeNames
// (node-cache-capable scheduler) or from full Node objects.
func candidateNames(args *extenderv1.ExtenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	if args.Nodes == nil {
		return nil
	}
	names := make([]string, len(args.Nodes.Items))
	for i := range args.Nodes.Items {
		names[i] = args.Nodes.Items[i].Name
	}
	return names
}
