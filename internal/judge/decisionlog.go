package judge

import (
	v1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/decisionlog"
	"github.com/regosched/regosched/internal/policy"
)

// The conversions of a decision into a decision log event, one place for
// both front ends: the extender's verbs (internal/decision) and
// regosched-scheduler's framework plugin, so that the two builds log the
// same decision the same way.

// DecisionLogBundle is the bundle name an event's bundles map the active
// policy's revision under: regosched runs one policy bundle.
const DecisionLogBundle = "regosched"

// DecisionLogPod is pod as an event names it: namespace, name, UID and the
// labels it came with (not those recalled for it). The labels map is
// shared: Enqueue copies it.
func DecisionLogPod(pod *v1.Pod) decisionlog.Pod {
	return decisionlog.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Labels: pod.Labels}
}

// DecisionLogDenials appends to out one denial per conflict of cs: its
// node, its rule, and the peer that made it fire, by namespace/name when s
// holds that peer (its UID otherwise). Front ends call it where they call
// Denied, once per conflicting node, so its cost follows the pod's
// conflicts, never the number of candidates. s.Peer builds s's index on
// first use: a front end that judges nodes from many goroutines calls
// s.Index first, as for Denied.
func DecisionLogDenials(out []decisionlog.Denial, s *Subject, cs []Conflict) []decisionlog.Denial {
	for _, c := range cs {
		d := decisionlog.Denial{Node: c.Node, Rule: c.Rule, Peer: string(c.Peer)}
		if p, ok := s.Peer(c.Peer); ok {
			d.Peer = p.Key()
		}
		out = append(out, d)
	}
	return out
}

// DecisionLogBundles is an event's bundles under p: {DecisionLogBundle:
// p's revision}, or nil for no policy.
func DecisionLogBundles(p *policy.Policy) map[string]string {
	if p == nil {
		return nil
	}
	return map[string]string{DecisionLogBundle: p.Revision()}
}
