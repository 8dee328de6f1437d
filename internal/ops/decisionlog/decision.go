package decisionlog

import "time"

// Decision is what a front end knows of one decision, in neutral terms:
// EventOf turns it into an event, deciding the outcome and naming what was
// cut in one place for both builds, as OPA's plugins/logs builds every
// event in one place.
type Decision struct {
	Verb    Verb
	Pod     Pod
	Bundles map[string]string
	// Nodes are the candidates asked about, or the first of them; NodeCount
	// is how many there were when Nodes holds only the first.
	Nodes     []string
	NodeCount int
	// Denied are the refused nodes' denials; DeniedCut says the front end
	// stopped collecting them. Refused is how many candidates were refused
	// (filter): all of them is unschedulable.
	Denied    []Denial
	DeniedCut bool
	Refused   int
	// Scores are the candidates scored below the maximum (prioritize);
	// ScoresCut says the front end stopped collecting them.
	Scores    map[string]int64
	ScoresCut bool
	// Victims are the preemption candidates kept (preempt).
	Victims    []Victim
	VictimsCut bool
	// Node is where bind bound the pod.
	Node string
	// Err is the decision's failure; BindRefused says a bind's Err is a
	// refusal (a rule would break, or the pod or node is not regosched's)
	// rather than a failure.
	Err         error
	BindRefused bool
	Took        time.Duration
}

// EventOf is d as an event.
func EventOf(d Decision) Event {
	e := Event{
		Verb: d.Verb, Pod: d.Pod, Bundles: d.Bundles, Nodes: d.Nodes, NodeCount: d.NodeCount,
		Denied: d.Denied, Scores: d.Scores, Victims: d.Victims, Node: d.Node, Duration: d.Took,
	}
	count := max(d.NodeCount, len(d.Nodes))
	if len(d.Nodes) > 0 && d.NodeCount > len(d.Nodes) { // preempt lists no nodes: nothing was cut

		e.Truncated = append(e.Truncated, TruncatedNodes)
	}
	for _, cut := range []struct {
		cut     bool
		pointer string
	}{{d.DeniedCut, TruncatedDenied}, {d.ScoresCut, TruncatedScores}, {d.VictimsCut, TruncatedVictims}} {
		if cut.cut {
			e.Truncated = append(e.Truncated, cut.pointer)
		}
	}
	if d.Err != nil {
		e.Outcome, e.Error = OutcomeError, d.Err.Error()
		if d.Verb == VerbBind && d.BindRefused {
			e.Outcome = OutcomeRefused
		}
		return e
	}
	switch d.Verb {
	case VerbFilter:
		e.Outcome = OutcomeFeasible
		if d.Refused >= count {
			e.Outcome = OutcomeUnschedulable
		}
	case VerbPrioritize:
		e.Outcome = OutcomeNoPreference
		if len(d.Scores) > 0 {
			e.Outcome = OutcomeScored
		}
	case VerbPreempt:
		e.Outcome = OutcomeFeasible
		if len(d.Victims) == 0 {
			e.Outcome = OutcomeUnschedulable
		}
	case VerbBind:
		e.Outcome = OutcomeBound
	}
	return e
}
