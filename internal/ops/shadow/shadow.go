// Package shadow judges a second policy beside the active one and never
// enforces it: each filter judgement is copied onto a bounded queue, judged
// again by a few workers under the shadow policy, and every node the two
// policies disagree on is counted and logged (sampled), as is a different
// score order of the nodes both allow (verb "prioritize", scored from the
// filter call's peers as prioritize would). A full queue drops the copy
// rather than delay the verb that offered it.
//
// The front ends call it through Offer with a plain Request, so the
// extender's internal/frontend/decision and regosched-scheduler's framework plugin
// share it; both open the bundle with Open. The verdict is the one
// judge's (judge.Beside, judge.Evaluate, judge.ScoreNodes).
package shadow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/util/flowcontrol"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Request is a copy of what one active filter judgement saw and answered;
// the caller must not change it after Offer.
type Request struct {
	// Verb is the extender verb judged ("filter").
	Verb string
	// Pod is the pending pod as the active judgement described it.
	Pod model.Pod
	// Peers are its peers as the active judgement saw them; the pods are
	// the cache's, which it never changes in place.
	Peers []*model.Pod
	// Nodes are the candidate node names, in the request's order.
	Nodes []string
	// Denied are the candidates the active policy turned away, with its
	// reason.
	Denied map[string]string
	// Penalties are the active policy's soft-rule penalties, from which
	// the candidates it kept are scored as prioritize scores them.
	Penalties []model.Penalty
}

// Offerer is the seam a front end calls: Offer never blocks and reports
// whether the request was queued.
type Offerer interface {
	Offer(r *Request) bool
}

// Policies gives the shadow policy; nil while none is loaded.
type Policies interface {
	Load() *policy.Policy
}

// Config is what a Shadow is made of.
type Config struct {
	Policies Policies
	// Nodes gives a node's labels and a key's domains, as the active
	// judgement reads them.
	Nodes policy.Cluster
	// Workers judge the queue; default DefaultWorkers.
	Workers int
	// Queue bounds the requests waiting; default DefaultQueue.
	Queue int
	// LogsPerSecond bounds the disagreement log lines (a burst of as many);
	// the rest are counted. Default DefaultLogsPerSecond.
	LogsPerSecond int
	// Timeout bounds each judgement under the shadow policy, as the active
	// policy's evaluations of a verb are bounded; one past it is counted
	// as an error. Default DefaultTimeout.
	Timeout    time.Duration
	Registerer prometheus.Registerer
	Log        logrus.FieldLogger
}

// Defaults of Config: one worker keeps the shadow from competing with the
// verbs for CPU, and a queue of 1,024 absorbs a burst of a scheduling cycle.
const (
	DefaultWorkers       = 1
	DefaultQueue         = 1024
	DefaultLogsPerSecond = 5
)

// DefaultTimeout is the deadline both front ends give the active policy's
// evaluations of one pod (the extender's decision.DefaultEvalTimeout, the
// plugin's policy.DescribeTimeout): a shadow that loops on a pod would
// otherwise hold a worker, and every judgement queued behind it, for good.
const DefaultTimeout = policy.DescribeTimeout

// ErrTimeout wraps the error of a judgement under the shadow policy that
// did not end within Config.Timeout.
var ErrTimeout = errors.New("the shadow policy's evaluation exceeded its deadline")

// Shadow judges offered requests under the shadow policy.
type Shadow struct {
	cfg           Config
	queue         chan *Request
	logs          flowcontrol.RateLimiter
	disagreements *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	errs          *prometheus.CounterVec
	unlogged      prometheus.Counter
}

// New returns a Shadow; Run starts its workers.
func New(cfg Config) (*Shadow, error) {
	if cfg.Policies == nil {
		return nil, errors.New("shadow: no policy")
	}
	if cfg.Log == nil {
		return nil, errors.New("shadow: no logger")
	}
	if cfg.Nodes == nil {
		return nil, errors.New("shadow: no nodes")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.LogsPerSecond <= 0 {
		cfg.LogsPerSecond = DefaultLogsPerSecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	s := &Shadow{
		cfg:   cfg,
		queue: make(chan *Request, cfg.Queue),
		logs:  flowcontrol.NewTokenBucketRateLimiter(float32(cfg.LogsPerSecond), cfg.LogsPerSecond),
		disagreements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_shadow_disagreements_total",
			Help: "Candidate nodes the shadow policy judged otherwise than the active one (allowed by one, denied by the other), by verb; never enforced.",
		}, []string{"verb"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_shadow_dropped_total",
			Help: "Judgements not judged again under the shadow policy because its queue was full, by verb.",
		}, []string{"verb"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_shadow_errors_total",
			Help: "Judgements the shadow policy failed to evaluate, its deadline passed included, by verb.",
		}, []string{"verb"}),
		unlogged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regosched_shadow_disagreements_unlogged_total",
			Help: "Shadow disagreements counted but not logged, over the log rate.",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.disagreements, s.dropped, s.errs, s.unlogged} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering the shadow's metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Offer queues r to be judged under the shadow policy, or drops and counts
// it when the queue is full: the verb that offers it must not wait.
func (s *Shadow) Offer(r *Request) bool {
	select {
	case s.queue <- r:
		return true
	default:
		s.dropped.WithLabelValues(r.Verb).Inc()
		return false
	}
}

// Run judges the queue with cfg.Workers workers until ctx ends.
func (s *Shadow) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case r := <-s.queue:
					s.judge(ctx, r)
				}
			}
		})
	}
	wg.Wait()
}

// judge evaluates r under the shadow policy and records where it disagrees.
func (s *Shadow) judge(ctx context.Context, r *Request) {
	denied, penalties, err := s.verdict(ctx, r)
	if err != nil {
		s.errs.WithLabelValues(r.Verb).Inc()
		s.cfg.Log.WithError(err).WithField("pod", r.Pod.Key()).Warn("shadow policy failed; nothing enforced")
		return
	}
	for _, node := range r.Nodes {
		active, a := r.Denied[node]
		shadow, b := denied[node]
		if a == b {
			continue
		}
		s.disagreements.WithLabelValues(r.Verb).Inc()
		if !s.logs.TryAccept() {
			s.unlogged.Inc()
			continue
		}
		s.cfg.Log.WithFields(logrus.Fields{
			"verb": r.Verb, "pod": r.Pod.Key(), "node": node,
			"active": verdict(a, active), "shadow": verdict(b, shadow),
		}).Info("shadow policy disagrees; the active one is enforced")
	}
	s.compareScores(r, denied, penalties)
}

// compareScores counts one prioritize disagreement when the candidates
// both policies allow are not in the same score order under the two
// policies' penalties (best first, ties by name), and logs the first node
// where the orders part.
func (s *Shadow) compareScores(r *Request, denied map[string]string, penalties []model.Penalty) {
	if slices.Equal(r.Penalties, penalties) {
		// The same soft rules score alike (both lists are in the policy's
		// canonical order): a shadow that changes only hard rules, the
		// usual case, costs no scoring of thousands of candidates.
		return
	}
	var both []string
	for _, n := range r.Nodes {
		_, a := r.Denied[n]
		_, b := denied[n]
		if !a && !b {
			both = append(both, n)
		}
	}
	active, shadow := s.scores(both, r.Penalties), s.scores(both, penalties)
	order := func(sc map[string]int64) []string {
		o := slices.Clone(both)
		slices.SortStableFunc(o, func(x, y string) int {
			if sc[x] != sc[y] {
				return cmp.Compare(sc[y], sc[x])
			}
			return cmp.Compare(x, y)
		})
		return o
	}
	ao, so := order(active), order(shadow)
	i := 0
	for i < len(ao) && ao[i] == so[i] {
		i++
	}
	if i == len(ao) {
		return
	}
	s.disagreements.WithLabelValues("prioritize").Inc()
	if !s.logs.TryAccept() {
		s.unlogged.Inc()
		return
	}
	s.cfg.Log.WithFields(logrus.Fields{
		"verb": "prioritize", "pod": r.Pod.Key(), "rank": i + 1,
		"active": fmt.Sprintf("%s scores %d", ao[i], active[ao[i]]), "shadow": fmt.Sprintf("%s scores %d", so[i], shadow[so[i]]),
	}).Info("shadow policy orders the nodes otherwise; the active one is enforced")
}

// scores are the nodes' scores under penalties, as prioritize gives them
// (judge.ScoreNodes): with no penalty, every node the maximum.
func (s *Shadow) scores(nodes []string, penalties []model.Penalty) map[string]int64 {
	out := make(map[string]int64, len(nodes))
	sc, ok := judge.ScoreNodes(penalties, nodes, func(_ int, name string) map[string]string {
		labels, _ := s.cfg.Nodes.NodeLabels(name)
		return labels
	}, nil)
	for i, n := range nodes {
		out[n] = extenderv1.MaxExtenderPriority
		if ok {
			out[n] = sc.Score(i, extenderv1.MaxExtenderPriority)
		}
	}
	return out
}

// verdict says a policy's answer on a node for the log.
func verdict(denied bool, reason string) string {
	if !denied {
		return "allowed"
	}
	return "denied: " + reason
}

// Denied judges r's pod under the shadow policy, with the peers the active
// judgement saw, and returns the candidates it denies with their reasons.
// The pod is described by the shadow policy; the peers keep the claims
// the active policy gave them.
func (s *Shadow) Denied(ctx context.Context, r *Request) (map[string]string, error) {
	denied, _, err := s.verdict(ctx, r)
	return denied, err
}

// verdict is Denied with the shadow policy's penalties, judged by the one
// judge (judge.Beside, judge.Evaluate) as the active policy is, within
// cfg.Timeout.
func (s *Shadow) verdict(ctx context.Context, r *Request) (map[string]string, []model.Penalty, error) {
	pol := s.cfg.Policies.Load()
	if pol == nil {
		return nil, nil, policy.ErrNoPolicy
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, ErrTimeout)
	defer cancel()
	sub, err := judge.Beside(ctx, pol, &r.Pod, r.Peers)
	if err != nil {
		return nil, nil, s.evalError(ctx, err)
	}
	v, err := judge.Evaluate(ctx, sub, s.cfg.Nodes)
	if err != nil {
		return nil, nil, s.evalError(ctx, err)
	}
	return v.Denied(r.Nodes), v.Penalties, nil
}

// evalError says, of err from an evaluation under ctx, that the shadow
// policy took too long when ctx's own deadline ended it.
func (s *Shadow) evalError(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), ErrTimeout) && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shadow: %w (%v): %w", ErrTimeout, s.cfg.Timeout, err)
	}
	return fmt.Errorf("shadow: %w", err)
}

// FilterRequestOf copies what the active policy's filter judgement f
// needs to be judged again: the pod, its peers, the nodes the hard rules
// turned away and the soft rules' penalties; nodes are the candidates
// (the plugin notes them later, as Filter sees them). Both front ends
// offer what it builds.
func FilterRequestOf(f *judge.Filtered, nodes []string) *Request {
	r := NewFilterRequest(f.Subject.Pod, f.Subject.Peers, nodes, f.Verdict.Denied(nodes))
	r.Penalties = f.Penalties() // the judge's, never changed after
	return r
}

// NewFilterRequest copies what a filter judgement needs to be judged again:
// the pod, the peers slice, the candidates and the denied nodes.
func NewFilterRequest(pod *model.Pod, peers []*model.Pod, nodes []string, denied ...map[string]string) *Request {
	r := &Request{Verb: "filter", Pod: *pod, Peers: slices.Clone(peers), Nodes: slices.Clone(nodes), Denied: map[string]string{}}
	for _, d := range denied {
		maps.Copy(r.Denied, d)
	}
	return r
}
