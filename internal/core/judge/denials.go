package judge

import (
	"strconv"

	"github.com/sirupsen/logrus"

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
