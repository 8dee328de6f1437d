package judge

import "github.com/regosched/regosched/internal/core/model"

// YieldZones lets the rules per domain of a key other than the hostname
// (a zone's) go when they would leave the pod nowhere to go: every node of
// nodes (the cluster's, in both front ends, so that they agree whatever
// other filters say) is refused, and some by those rules alone. A group whose members
// were placed before its shape was known (a replica before its master, a
// quorum before its size), or whose zones' nodes other rules took, is then
// placed, and the audit reports the rule broken, rather than the pod left
// pending forever for want of a zone. labels, if set, gives node i's
// labels (the request's). It reports whether the rules yield.
func (v *Verdict) YieldZones(nodes []string, labels func(i int, name string) map[string]string) bool {
	if !v.PerDomain() || v.zonesYield {
		return v.zonesYield
	}
	alone := false
	for i, name := range nodes {
		var l map[string]string
		if labels != nil {
			l = labels(i, name)
		}
		cs := v.at(name, l, labels != nil)
		if len(cs) == 0 {
			return false // the pod fits here
		}
		alone = alone || perZoneAlone(cs)
	}
	v.zonesYield = alone
	return alone
}

// perZoneAlone: every conflict of cs is per domain of a key other than the
// hostname.
func perZoneAlone(cs []model.Conflict) bool {
	for _, c := range cs {
		if c.Domain.OnNode() {
			return false
		}
	}
	return true
}
