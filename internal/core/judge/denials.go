package judge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
)

// Denied logs and counts the hard rules that turn s's pod away from node
// (or, for a rule per zone, from the domain key=value it names):
// one entry per conflict (rule, reason, peer, policy revision), at Info,
// and regosched_filter_denials_total{rule,resolvable}. Front ends call it
// once per conflicting node per attempt to place the pod, never per
// candidate node or per preemption dry run, so the volume is bounded by
// the pod's peers however large the cluster.
func (j *Judge) Denied(s *Subject, node string, cs []model.Conflict, preemptible bool, verb string) {
	resolvable := strconv.FormatBool(preemptible)
	for _, c := range cs {
		j.denials.WithLabelValues(c.Rule, resolvable).Inc()
		fields := logrus.Fields{
			"pod": s.Pod.Key(), "node": node, "rule": c.Rule, "reason": c.Reason,
			"resolvable": preemptible, "policyRevision": s.Policy.Revision(), "verb": verb,
		}
		fields["peer"] = s.PeerName(c.Peer)
		j.cfg.Log.WithFields(fields).Info("denied")
	}
}

// deniedCandidates is Denied for the refused candidates of a filter call:
// the rules per node once per refused node, and a rule per zone once per
// zone, not once per node of it (thousands of log lines per call).
func (j *Judge) deniedCandidates(s *Subject, refused []Refusal) {
	var zones map[model.Domain]bool // logged already
	for _, r := range refused {
		if perNodeOnly(r.Conflicts) {
			j.Denied(s, r.Node, r.Conflicts, r.Resolvable, "filter")
			continue
		}
		var onNode []model.Conflict
		for _, c := range r.Conflicts {
			if c.Domain.OnNode() {
				onNode = append(onNode, c)
			}
		}
		if len(onNode) > 0 {
			j.Denied(s, r.Node, onNode, r.Resolvable, "filter")
		}
		for _, c := range r.Conflicts {
			if c.Domain.OnNode() || zones[c.Domain] {
				continue
			}
			if zones == nil {
				zones = map[model.Domain]bool{}
			}
			zones[c.Domain] = true
			var here []model.Conflict
			for _, d := range r.Conflicts {
				if d.Domain == c.Domain {
					here = append(here, d)
				}
			}
			j.Denied(s, c.Domain.String(), here, false, "filter")
		}
	}
}

// perNodeOnly: every conflict of cs is on its node.
func perNodeOnly(cs []model.Conflict) bool {
	for _, c := range cs {
		if !c.Domain.OnNode() {
			return false
		}
	}
	return true
}

// maxYieldReasons is how many rules the Event of Yielded names.
const maxYieldReasons = 3

// ZonesYielded is the reason of the Event Yielded records.
const ZonesYielded = "ZoneRulesYielded"

// Yielded reports that the rules per zone yielded for s's pod (YieldZones):
// at Info, in regosched_zone_rules_yielded_total{verb}, and as a Warning
// Event on the pod, where its owner looks (kubectl describe), naming the
// rules it will break; the audit reports them broken once it is bound.
func (j *Judge) Yielded(s *Subject, v *Verdict, verb string) {
	j.yields.WithLabelValues(verb).Inc()
	j.cfg.Log.WithFields(logrus.Fields{"pod": s.Pod.Key(), "verb": verb, "policyRevision": s.Policy.Revision()}).
		Info("every node refused, some by rules per zone alone: those rules yield")
	if j.cfg.Recorder == nil {
		return
	}
	var reasons []string
	for _, c := range v.Conflicts() {
		if !c.Domain.OnNode() && !slices.Contains(reasons, c.Reason) {
			reasons = append(reasons, c.Reason)
		}
	}
	// An Event's note holds 1 kB: a few reasons say enough.
	if n := len(reasons); n > maxYieldReasons {
		reasons = append(reasons[:maxYieldReasons], fmt.Sprintf("and %d more", n-maxYieldReasons))
	}
	ref := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: s.Pod.Namespace, Name: s.Pod.Name, UID: s.Pod.UID}
	j.cfg.Recorder.Eventf(ref, nil, v1.EventTypeWarning, ZonesYielded, "Schedule",
		"no node takes the pod under the rules per zone, so they yield and it is placed breaking one: %s", strings.Join(reasons, "; "))
}
