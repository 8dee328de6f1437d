package plugin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/plumbing/version"
)

// The decision log (Args.DecisionLog) gives the extender's events, verb
// for verb, so that one collector query reads both builds:
//
//   - filter: once per scheduling cycle, when the filtering is over (at
//     PreScore, Reserve or PostFilter, as the shadow is offered, or at the
//     first RemovePod of default preemption's dry run, which runs before
//     regosched's PostFilter and may end the cycle): the nodes Filter was
//     called for (the extender's candidates: those every filter before it
//     let through), those it turned away with rule and peer, and whether it
//     kept any. A cycle in which no node reached Filter gives none, as the
//     scheduler calls no extender without candidates.
//   - prioritize: at NormalizeScore, the nodes scored below the maximum, on
//     the extender's scale (0..10, judge.Score with MaxExtenderPriority), so
//     that the numbers are the extender's; at PreScore, no_preference when
//     no soft rule applies (Score is skipped then).
//   - bind: at PostBind (bound), or at Unreserve or a failed Reserve (error):
//     the default binder binds, and regosched learns the outcome there.
//   - preempt: none. The plugin picks no victims: default preemption does,
//     asking regosched through RemovePod, AddPod and Filter on its dry run's
//     clones of the cycle state; a pod it preempts for is scheduled in a
//     later cycle, which gives that cycle's filter and bind events.
//
// With no decision log, the extension points test one nil pointer. An
// event's lists are gathered where the plugin already visits each item
// (Filter's calls, NormalizeScore's loop), at most decisionlog.MaxListed of
// them, and Enqueue never waits for the sink.

// DecisionLogArgs are the plugin arg decisionLog: `regosched serve`'s
// --decision-log* flags, one to one, with the same defaults.
type DecisionLogArgs struct {
	// Target is "stdout", a file path (appended to), or the http(s):// URL
	// of an OPA decision log service; empty turns the decision log off.
	Target string `json:"target,omitempty"`
	// Sample is the share of decisions logged, 0..1; 1 when unset.
	Sample *float64 `json:"sample,omitempty"`
	// MaskLabels are pod label keys kept out of the events, as MaskMode
	// says: drop (the default) or replace.
	MaskLabels []string `json:"maskLabels,omitempty"`
	MaskMode   string   `json:"maskMode,omitempty"`
	// BufferSize bounds the events waiting for the sink (10000 when unset).
	BufferSize int `json:"bufferSize,omitempty"`
	// FlushInterval is how often the buffer is sent (5s when unset).
	FlushInterval string `json:"flushInterval,omitempty"`
	// HTTP targets only: the timeout of each upload (10s), the retries of
	// a failed upload (5 when unset; 0 none), the largest upload in bytes
	// (32768), the CAs of an https service, a bearer token file, and
	// Insecure to send that token over plain http.
	Timeout          string `json:"timeout,omitempty"`
	MaxRetries       *int   `json:"maxRetries,omitempty"`
	UploadLimitBytes int    `json:"uploadLimitBytes,omitempty"`
	CACert           string `json:"caCert,omitempty"`
	BearerTokenFile  string `json:"bearerTokenFile,omitempty"`
	Insecure         bool   `json:"insecure,omitempty"`
}

// decisionLogConfig checks a and opens its sink, as serve checks and
// opens its --decision-log* flags (decisionlog.Settings): a
// decisionlog.Config with the settings, its Sink nil when a is off. Errors
// name the arg.
func (a *DecisionLogArgs) decisionLogConfig() (decisionlog.Config, error) {
	if a == nil || a.Target == "" {
		return decisionlog.Config{}, nil
	}
	name := func(setting string) string { return "decisionLog." + setting }
	set := decisionlog.Settings{
		Target: a.Target, SampleRate: 1, MaskLabels: a.MaskLabels, MaskMode: a.MaskMode,
		BufferEvents: a.BufferSize, UploadLimitBytes: a.UploadLimitBytes, MaxRetries: decisionlog.DefaultMaxRetries,
		CACertFile: a.CACert, BearerTokenFile: a.BearerTokenFile, Insecure: a.Insecure,
	}
	if a.Sample != nil {
		set.SampleRate = *a.Sample
	}
	if a.MaxRetries != nil {
		set.MaxRetries = *a.MaxRetries
	}
	var err error
	if set.FlushInterval, err = positiveDuration(a.FlushInterval); err != nil {
		return decisionlog.Config{}, fmt.Errorf("%s args: %s: %w", Name, name(decisionlog.SettingFlushInterval), err)
	}
	if set.Timeout, err = positiveDuration(a.Timeout); err != nil {
		return decisionlog.Config{}, fmt.Errorf("%s args: %s: %w", Name, name(decisionlog.SettingTimeout), err)
	}
	cfg, err := set.Config(name)
	if err != nil {
		return decisionlog.Config{}, fmt.Errorf("%s args: %w", Name, err)
	}
	return cfg, nil
}

// positiveDuration parses s; empty is 0, the setting's default.
func positiveDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", s)
	}
	return d, nil
}

// startDecisionLog starts the logger of cfg (its Sink set, and owned
// from here on: closed on error), its dropped counter on reg, and closes it
// when ctx ends if the framework has not already (Close).
func (pl *Regosched) startDecisionLog(ctx context.Context, cfg decisionlog.Config, reg prometheus.Registerer, log logrus.FieldLogger) error {
	cfg.Registerer, cfg.Log = reg, log
	if cfg.InstanceID == "" {
		// The pod's name in a cluster: events of two replicas stay apart.
		if cfg.InstanceID, _ = os.Hostname(); cfg.InstanceID == "" {
			cfg.InstanceID = "regosched-scheduler"
		}
	}
	if cfg.Version == "" {
		cfg.Version = version.Get().Version
	}
	l, err := decisionlog.New(cfg)
	if err != nil {
		_ = cfg.Sink.Close()
		return fmt.Errorf("%s: decisionLog: %w", Name, err)
	}
	pl.decisionLog = l
	pl.closeLog = sync.OnceValue(func() error { return closeDecisionLog(l) })
	go func() {
		<-ctx.Done()
		if err := pl.closeLog(); err != nil {
			log.WithError(err).Warn("decision log events lost at shutdown")
		}
	}()
	return nil
}

// closeDecisionLog sends what the logger holds, within
// decisionlog.CloseTimeout; a collector that does not take it costs those
// events (counted), not a stuck shutdown.
func closeDecisionLog(l *decisionlog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), decisionlog.CloseTimeout)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		return fmt.Errorf("%s: closing the decision log: %w", Name, err)
	}
	return nil
}

// Close flushes and closes the decision log: the framework calls it when
// the scheduler stops (plugins that are io.Closers are closed).
func (pl *Regosched) Close() error {
	if pl.closeLog == nil {
		return nil
	}
	return pl.closeLog()
}

// cycleLog gathers one scheduling cycle's events; nil without a decision
// log. Clones of the cycle state share it.
type cycleLog struct {
	pod     decisionlog.Pod
	bundles map[string]string
	// took is PreFilter's time, where the hard rules are judged: the
	// filter event's duration.
	took time.Duration

	// Filter's calls note the candidates: a slot each for the first
	// MaxListed, the count of all.
	slots [decisionlog.MaxListed]string
	seen  atomic.Int64

	mu          sync.Mutex
	denied      []decisionlog.Denial
	deniedNodes int
	cut         bool // denials beyond MaxListed were not kept

	filtered atomic.Bool // the filter event was given
	scoring  time.Time   // PreScore's start
	reserved time.Time   // Reserve's start
	bound    atomic.Bool // the bind event was given
}

// newCycleLog starts a cycle's record of pod under pol.
func newCycleLog(pod *v1.Pod, pol *policy.Policy) *cycleLog {
	return &cycleLog{pod: decisionlog.PodOf(pod), bundles: decisionlog.BundlesOf(pol)}
}

// saw notes a candidate; safe from Filter's parallel calls.
func (c *cycleLog) saw(node string) {
	if i := c.seen.Add(1) - 1; i < int64(len(c.slots)) {
		c.slots[i] = node
	}
}

// deny records the denials of a node Filter turned away.
func (c *cycleLog) deny(s *judge.Subject, cs []model.Conflict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deniedNodes++
	if len(c.denied) >= decisionlog.MaxListed {
		c.cut = true
		return
	}
	c.denied = decisionlog.DenialsOf(c.denied, cs, s.PeerName)
}

// candidates are the nodes Filter noted, at most MaxListed, and their count.
func (c *cycleLog) candidates() ([]string, int) {
	n := int(c.seen.Load())
	return c.slots[:min(n, len(c.slots))], n
}

// logFilter gives the cycle's filter event once, when the filtering is
// over. nodes are the candidates when Filter noted none because PreFilter
// skipped it (a pod in no group): the feasible nodes PreScore or Reserve
// got, all kept.
func (pl *Regosched) logFilter(c *cycleLog, nodes func() ([]string, int)) {
	if c == nil || c.filtered.Load() {
		return
	}
	listed, count := c.candidates()
	if count == 0 && nodes != nil {
		listed, count = nodes()
	}
	if count == 0 || !c.filtered.CompareAndSwap(false, true) {
		return // no candidate: the scheduler would have called no extender
	}
	e := decisionlog.Event{
		Verb: decisionlog.VerbFilter, Pod: c.pod, Bundles: c.bundles, Duration: c.took,
		Nodes: listed, NodeCount: count, Outcome: decisionlog.OutcomeFeasible,
	}
	if count > len(listed) {
		e.Truncated = append(e.Truncated, decisionlog.TruncatedNodes)
	}
	c.mu.Lock()
	e.Denied = c.denied
	if c.cut {
		e.Truncated = append(e.Truncated, decisionlog.TruncatedDenied)
	}
	if c.deniedNodes >= count {
		e.Outcome = decisionlog.OutcomeUnschedulable
	}
	pl.decisionLog.Enqueue(e)
	c.mu.Unlock()
}

// logFilterError gives the filter event of a cycle whose PreFilter failed.
func (pl *Regosched) logFilterError(pod *v1.Pod, nodes int, took time.Duration, err error) {
	pl.decisionLog.Enqueue(decisionlog.Event{
		Verb: decisionlog.VerbFilter, Pod: decisionlog.PodOf(pod), Bundles: decisionlog.BundlesOf(pl.policies.Load()),
		NodeCount: nodes, Duration: took, Outcome: decisionlog.OutcomeError, Error: err.Error(),
	})
}

// nodeNames are the names of the first MaxListed of nodes, and their count.
func nodeNames(nodes []fwk.NodeInfo) func() ([]string, int) {
	return func() ([]string, int) {
		names := make([]string, 0, min(len(nodes), decisionlog.MaxListed))
		for _, ni := range nodes[:cap(names)] {
			if n := ni.Node(); n != nil {
				names = append(names, n.Name)
			}
		}
		return names, len(nodes)
	}
}

// logNoPreference gives the prioritize event of a cycle whose pod no soft
// rule concerns, as the extender's prioritize answers it.
func (pl *Regosched) logNoPreference(c *cycleLog, nodes []fwk.NodeInfo) {
	names, count := nodeNames(nodes)()
	e := decisionlog.Event{
		Verb: decisionlog.VerbPrioritize, Pod: c.pod, Bundles: c.bundles, Duration: time.Since(c.scoring),
		Nodes: names, NodeCount: count, Outcome: decisionlog.OutcomeNoPreference,
	}
	if count > len(names) {
		e.Truncated = []string{decisionlog.TruncatedNodes}
	}
	pl.decisionLog.Enqueue(e)
}

// logScores gives the prioritize event from NormalizeScore's penalties
// (Score's, before normalization) and the highest of them: the nodes that
// score below the extender's maximum, with the extender's score.
func (pl *Regosched) logScores(c *cycleLog, scores fwk.NodeScoreList, highest float64) {
	e := decisionlog.Event{
		Verb: decisionlog.VerbPrioritize, Pod: c.pod, Bundles: c.bundles,
		NodeCount: len(scores), Outcome: decisionlog.OutcomeNoPreference,
	}
	e.Nodes = make([]string, 0, min(len(scores), decisionlog.MaxListed))
	for _, s := range scores {
		if len(e.Nodes) < cap(e.Nodes) {
			e.Nodes = append(e.Nodes, s.Name)
		}
		score := judge.Score(math.Float64frombits(uint64(s.Score)), highest, extenderv1.MaxExtenderPriority)
		if score >= extenderv1.MaxExtenderPriority {
			continue
		}
		if len(e.Scores) == decisionlog.MaxListed {
			e.Truncated = append(e.Truncated, decisionlog.TruncatedScores)
			break
		}
		if e.Scores == nil {
			e.Scores = map[string]int64{}
		}
		e.Scores[s.Name] = score
	}
	if len(scores) > len(e.Nodes) {
		e.Truncated = append(e.Truncated, decisionlog.TruncatedNodes)
	}
	if len(e.Scores) > 0 {
		e.Outcome = decisionlog.OutcomeScored
	}
	e.Duration = time.Since(c.scoring)
	pl.decisionLog.Enqueue(e)
}

// errNotBound is a bind event's error when the pod's reservation was
// taken back: a later Reserve, Permit, PreBind or Bind plugin failed.
var errNotBound = errors.New("not bound: the scheduler took back the reservation (a Reserve, Permit, PreBind or Bind plugin failed)")

// logBind gives the cycle's bind event once: bound when err is nil.
func (pl *Regosched) logBind(c *cycleLog, pod *v1.Pod, node string, err error) {
	if c == nil || !c.bound.CompareAndSwap(false, true) {
		return
	}
	e := decisionlog.Event{
		Verb: decisionlog.VerbBind, Pod: decisionlog.PodOf(pod), Bundles: c.bundles,
		Node: node, Outcome: decisionlog.OutcomeBound,
	}
	if !c.reserved.IsZero() {
		e.Duration = time.Since(c.reserved)
	}
	if err != nil {
		e.Outcome, e.Error = decisionlog.OutcomeError, err.Error()
	}
	pl.decisionLog.Enqueue(e)
}

// cycleLogOf is the cycle's record, nil without a decision log or state.
func cycleLogOf(cs fwk.CycleState) *cycleLog {
	s, err := getState(cs)
	if err != nil {
		return nil
	}
	return s.log
}

// PostBind gives the bind event of a pod the scheduler bound.
func (pl *Regosched) PostBind(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	if pl.decisionLog == nil {
		return
	}
	pl.logBind(cycleLogOf(cs), pod, nodeName, nil)
}
