package plugin

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/decisionlog"
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
	c.mu.Lock()
	defer c.mu.Unlock()
	pl.decisionLog.Enqueue(decisionlog.EventOf(decisionlog.Decision{
		Verb: decisionlog.VerbFilter, Pod: c.pod, Bundles: c.bundles, Took: c.took, Nodes: listed, NodeCount: count,
		Denied: c.denied, DeniedCut: c.cut, Refused: c.deniedNodes,
	}))
}

// logFilterError gives the filter event of a cycle whose PreFilter failed.
func (pl *Regosched) logFilterError(pod *v1.Pod, nodes int, took time.Duration, err error) {
	pl.decisionLog.Enqueue(decisionlog.EventOf(decisionlog.Decision{
		Verb: decisionlog.VerbFilter, Pod: decisionlog.PodOf(pod), Bundles: decisionlog.BundlesOf(pl.policies.Load()),
		NodeCount: nodes, Took: took, Err: err,
	}))
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
	pl.decisionLog.Enqueue(decisionlog.EventOf(decisionlog.Decision{
		Verb: decisionlog.VerbPrioritize, Pod: c.pod, Bundles: c.bundles, Took: time.Since(c.scoring), Nodes: names, NodeCount: count,
	}))
}

// logScores gives the prioritize event from NormalizeScore's penalties
// (Score's, before normalization) and the highest of them: the nodes that
// score below the extender's maximum, with the extender's score.
func (pl *Regosched) logScores(c *cycleLog, scores fwk.NodeScoreList, highest float64) {
	d := decisionlog.Decision{Verb: decisionlog.VerbPrioritize, Pod: c.pod, Bundles: c.bundles, NodeCount: len(scores)}
	d.Nodes = make([]string, 0, min(len(scores), decisionlog.MaxListed))
	for _, s := range scores {
		if len(d.Nodes) < cap(d.Nodes) {
			d.Nodes = append(d.Nodes, s.Name)
		}
		score := judge.Score(math.Float64frombits(uint64(s.Score)), highest, extenderv1.MaxExtenderPriority)
		if score >= extenderv1.MaxExtenderPriority {
			continue
		}
		if len(d.Scores) == decisionlog.MaxListed {
			d.ScoresCut = true
			break
		}
		if d.Scores == nil {
			d.Scores = map[string]int64{}
		}
		d.Scores[s.Name] = score
	}
	d.Took = time.Since(c.scoring)
	pl.decisionLog.Enqueue(decisionlog.EventOf(d))
}

// errNotBound is a bind event's error when the pod's reservation was
// taken back: a later Reserve, Permit, PreBind or Bind plugin failed.
var errNotBound = errors.New("not bound: the scheduler took back the reservation (a Reserve, Permit, PreBind or Bind plugin failed)")

// logBind gives the cycle's bind event once: bound when err is nil.
func (pl *Regosched) logBind(c *cycleLog, pod *v1.Pod, node string, err error) {
	if c == nil || !c.bound.CompareAndSwap(false, true) {
		return
	}
	d := decisionlog.Decision{Verb: decisionlog.VerbBind, Pod: decisionlog.PodOf(pod), Bundles: c.bundles, Node: node, Err: err}
	if !c.reserved.IsZero() {
		d.Took = time.Since(c.reserved)
	}
	pl.decisionLog.Enqueue(decisionlog.EventOf(d))
}

// cycleLogOf is the cycle's record, nil without a decision log or state.
func cycleLogOf(cs fwk.CycleState) *cycleLog {
	s, err := getState(cs)
	if err != nil {
		return nil
	}
	return s.log
}
