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

// Victim is a node preempt offered and the pods that would be evicted there.
type Victim struct {
	Node string   `json:"node"`
	Pods []string `json:"pods,omitempty"`
}

// Event is one decision. Enqueue does not copy its maps and slices: they are
// read later on the logger's goroutine, so the caller must not change them
// after Enqueue (informer objects and freshly built verdicts never are).
type Event struct {
	// DecisionID is filled in by the logger when empty.
	DecisionID string
	// Timestamp is filled in by Enqueue when zero.
	Timestamp time.Time
	Verb      Verb
	Pod       Pod
	// Nodes are the candidate nodes the verb was asked about.
	Nodes []string
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
	Timestamp  time.Time             `json:"timestamp"`
	Metrics    map[string]any        `json:"metrics,omitempty"`
}

type bundleInfo struct {
	Revision string `json:"revision,omitempty"`
}

type wireInput struct {
	Pod   Pod      `json:"pod"`
	Nodes []string `json:"nodes,omitempty"`
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
	return n
}

// pointerEscape escapes a label key as a JSON pointer token (RFC 6901), as
// OPA's erased and masked paths are JSON pointers.
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
