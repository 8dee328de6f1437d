// Package decisionlog records regosched's filter, prioritize, preempt and
// bind decisions as OPA decision log events, so that collectors built for
// OPA's decision log API accept them unchanged.
package decisionlog

import (
	"strings"
	"time"
)

// Verb is the extender verb a decision answered.
type Verb string

// The verbs regosched decides; an event's path is "regosched/<verb>".
const (
	VerbFilter     Verb = "filter"
	VerbPrioritize Verb = "prioritize"
	VerbPreempt    Verb = "preempt"
	VerbBind       Verb = "bind"
)

// Path returns the event's OPA path, named like a policy path so that
// collectors group regosched's verbs as they group OPA queries.
func (v Verb) Path() string { return "regosched/" + string(v) }

// Pod names the pod a decision was about.
type Pod struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	UID       string            `json:"uid,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// Denial is one node refused by one rule, with the peer that made the rule
// fire when there is one.
type Denial struct {
	Node string `json:"node"`
	Rule string `json:"rule"`
	Peer string `json:"peer,omitempty"`
}

// Outcomes of the verbs: how a decision ended, in result.outcome.
const (
	// OutcomeFeasible: filter kept at least one candidate, or preempt kept
	// at least one preemption candidate.
	OutcomeFeasible = "feasible"
	// OutcomeUnschedulable: filter kept no candidate, or preempt kept none.
	OutcomeUnschedulable = "unschedulable"
	// OutcomeScored: prioritize preferred some candidates to others.
	OutcomeScored = "scored"
	// OutcomeNoPreference: prioritize scored no candidate (no peers, or no
	// soft rule told the candidates apart).
	OutcomeNoPreference = "no_preference"
	// OutcomeBound: bind bound the pod (or found it bound there already).
	OutcomeBound = "bound"
	// OutcomeRefused: bind refused, because a hard rule would break or the
	// pod or node is not regosched's to bind.
	OutcomeRefused = "refused"
	// OutcomeError: the verb failed; Error says why.
	OutcomeError = "error"
)

// MaxListed bounds each list an event carries (candidate nodes, denials,
// scores, victims): an event must stay far below the upload size limit
// (OPA's default is 32 KiB), and a 5,000-node filter call must cost the
// verb no more to log than a 10-node one. What is cut is named in
// Event.Truncated; NodeCount keeps the number of candidates.
const MaxListed = 100

// Victim is a node preempt offered and the pods that would be evicted there.
type Victim struct {
	Node string   `json:"node"`
	Pods []string `json:"pods,omitempty"`
}

// Event is one decision. Enqueue copies what it keeps (lists cut to
// MaxListed, every string into one block of its own), so the caller may
// reuse its slices and maps as soon as Enqueue returns, and a kept event
// pins no request's memory while it waits in the buffer.
type Event struct {
	// DecisionID is filled in by the logger when empty.
	DecisionID string
	// Timestamp is filled in by Enqueue when zero.
	Timestamp time.Time
	Verb      Verb
	Pod       Pod
	// Nodes are the candidate nodes the verb was asked about: the first
	// MaxListed of them.
	Nodes []string
	// NodeCount is how many candidates there were; Enqueue sets it to
	// len(Nodes) when zero.
	NodeCount int
	// Bundles maps each policy bundle's name to its revision.
	Bundles map[string]string
	Denied  []Denial
	Scores  map[string]int64
	Victims []Victim
	// Node is the node bind bound the pod to.
	Node string
	// Outcome says how the decision ended, e.g. "scheduled", "unschedulable", "error".
	Outcome string
	// Error is the decision's error message, if any.
	Error string
	// Duration is how long the decision took; it becomes metrics.timer_regosched_decision_ns.
	Duration time.Duration
	// Truncated lists, as JSON pointers ("/input/nodes", "/result/scores"),
	// the lists cut to MaxListed: by the caller, which may stop collecting
	// there, or by Enqueue.
	Truncated []string
}

// MetricDecisionNS is the metrics key of Event.Duration, named like OPA's
// timer_*_ns metrics so that dashboards reading OPA's events read it too.
const MetricDecisionNS = "timer_regosched_decision_ns"

// wireEvent is the JSON of an event: the field names and shapes are those of
// OPA's plugins/logs EventV1, which OPA-compatible collectors decode.
type wireEvent struct {
	Labels     map[string]string     `json:"labels"`
	DecisionID string                `json:"decision_id"`
	Bundles    map[string]bundleInfo `json:"bundles,omitempty"`
	Path       string                `json:"path"`
	Input      wireInput             `json:"input"`
	Result     wireResult            `json:"result"`
	Erased     []string              `json:"erased,omitempty"`
	Masked     []string              `json:"masked,omitempty"`
	Truncated  []string              `json:"truncated,omitempty"`
	Timestamp  time.Time             `json:"timestamp"`
	Metrics    map[string]any        `json:"metrics,omitempty"`
}

type bundleInfo struct {
	Revision string `json:"revision,omitempty"`
}

type wireInput struct {
	Pod       Pod      `json:"pod"`
	Nodes     []string `json:"nodes,omitempty"`
	NodeCount int      `json:"node_count,omitempty"`
}

type wireResult struct {
	Outcome string           `json:"outcome"`
	Denied  []Denial         `json:"denied,omitempty"`
	Scores  map[string]int64 `json:"scores,omitempty"`
	Victims []Victim         `json:"victims,omitempty"`
	Node    string           `json:"node,omitempty"`
	Error   string           `json:"error,omitempty"`
}

// eventOverhead is roughly the JSON an event costs beyond its strings, so
// that the byte bound holds without encoding on the caller's goroutine.
const eventOverhead = 256

// approxSize estimates the event's encoded size from its string lengths: a
// cheap bound for the buffer, not an exact count.
func (e *Event) approxSize() int {
	n := eventOverhead + len(e.DecisionID) + len(e.Pod.Namespace) + len(e.Pod.Name) + len(e.Pod.UID) +
		len(e.Node) + len(e.Outcome) + len(e.Error)
	for k, v := range e.Pod.Labels {
		n += len(k) + len(v) + 6
	}
	for _, s := range e.Nodes {
		n += len(s) + 3
	}
	for k, v := range e.Bundles {
		n += len(k) + len(v) + 20
	}
	for _, d := range e.Denied {
		n += len(d.Node) + len(d.Rule) + len(d.Peer) + 32
	}
	for k := range e.Scores {
		n += len(k) + 24
	}
	for _, v := range e.Victims {
		n += len(v.Node) + 20
		for _, p := range v.Pods {
			n += len(p) + 3
		}
	}
	for _, t := range e.Truncated {
		n += len(t) + 3
	}
	return n
}

// pointerEscape escapes a label key as a JSON pointer token (RFC 6901), as
// OPA's erased and masked paths are JSON pointers.
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Pointers of the lists Enqueue may cut, in Event.Truncated.
const (
	TruncatedNodes   = "/input/nodes"
	TruncatedDenied  = "/result/denied"
	TruncatedScores  = "/result/scores"
	TruncatedVictims = "/result/victims"
)

// detach cuts e's lists to MaxListed and copies e's slices, maps and
// strings, the strings into one block: the caller's may be reused once
// Enqueue returns (a request's candidate list is), and a string of the
// caller's may share memory with a whole request body (the extender's
// decoder packs a request's strings together), which an event waiting in
// a full buffer behind a stalled sink must not hold.
func (e *Event) detach() {
	if e.NodeCount == 0 {
		e.NodeCount = len(e.Nodes)
	}
	var cut []string
	if len(e.Nodes) > MaxListed {
		e.Nodes, cut = e.Nodes[:MaxListed], append(cut, TruncatedNodes)
	}
	if len(e.Denied) > MaxListed {
		e.Denied, cut = e.Denied[:MaxListed], append(cut, TruncatedDenied)
	}
	if len(e.Victims) > MaxListed {
		e.Victims, cut = e.Victims[:MaxListed], append(cut, TruncatedVictims)
	}
	scores := len(e.Scores)
	if scores > MaxListed {
		scores, cut = MaxListed, append(cut, TruncatedScores)
	}

	var a arena
	a.b.Grow(e.stringBytes(scores))
	e.DecisionID = a.clone(e.DecisionID)
	e.Pod.Namespace, e.Pod.Name, e.Pod.UID = a.clone(e.Pod.Namespace), a.clone(e.Pod.Name), a.clone(e.Pod.UID)
	e.Pod.Labels = a.cloneMap(e.Pod.Labels)
	e.Bundles = a.cloneMap(e.Bundles)
	e.Node, e.Outcome, e.Error = a.clone(e.Node), a.clone(e.Outcome), a.clone(e.Error)
	if e.Nodes != nil {
		nodes := make([]string, len(e.Nodes))
		for i, n := range e.Nodes {
			nodes[i] = a.clone(n)
		}
		e.Nodes = nodes
	}
	if e.Denied != nil {
		denied := make([]Denial, len(e.Denied))
		for i, d := range e.Denied {
			denied[i] = Denial{Node: a.clone(d.Node), Rule: a.clone(d.Rule), Peer: a.clone(d.Peer)}
		}
		e.Denied = denied
	}
	if e.Scores != nil {
		out := make(map[string]int64, scores)
		for k, v := range e.Scores {
			if len(out) == scores {
				break
			}
			out[a.clone(k)] = v
		}
		e.Scores = out
	}
	if e.Victims != nil {
		victims := make([]Victim, len(e.Victims))
		for i, v := range e.Victims {
			victims[i].Node = a.clone(v.Node)
			if v.Pods != nil {
				victims[i].Pods = make([]string, len(v.Pods))
				for j, p := range v.Pods {
					victims[i].Pods[j] = a.clone(p)
				}
			}
		}
		e.Victims = victims
	}
	if len(e.Truncated) > 0 || len(cut) > 0 {
		// The pointers are constants (the caller's too): no clone needed.
		e.Truncated = append(append([]string(nil), e.Truncated...), cut...)
	}
}

// stringBytes is the length of every string detach copies, with scores
// entries of Scores.
func (e *Event) stringBytes(scores int) int {
	n := len(e.DecisionID) + len(e.Pod.Namespace) + len(e.Pod.Name) + len(e.Pod.UID) +
		len(e.Node) + len(e.Outcome) + len(e.Error)
	for k, v := range e.Pod.Labels {
		n += len(k) + len(v)
	}
	for k, v := range e.Bundles {
		n += len(k) + len(v)
	}
	for _, s := range e.Nodes {
		n += len(s)
	}
	for _, d := range e.Denied {
		n += len(d.Node) + len(d.Rule) + len(d.Peer)
	}
	seen := 0
	for k := range e.Scores {
		if seen == scores {
			break
		}
		n += len(k)
		seen++
	}
	for _, v := range e.Victims {
		n += len(v.Node)
		for _, p := range v.Pods {
			n += len(p)
		}
	}
	return n
}

// arena copies strings into one block: a strings.Builder grown once
// hands out substrings of its buffer, which later writes never change.
type arena struct{ b strings.Builder }

func (a *arena) clone(s string) string {
	if s == "" {
		return ""
	}
	off := a.b.Len()
	a.b.WriteString(s)
	return a.b.String()[off:]
}

func (a *arena) cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[a.clone(k)] = a.clone(v)
	}
	return out
}
