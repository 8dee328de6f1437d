package audit

import (
	"slices"

	"github.com/sirupsen/logrus"
)

// publish refills the gauge, logs the violations the previous pass did
// not have, announces them (announce) and remembers this pass's for the
// next. A violation of a skipped pod stays remembered: it is unknown, not
// gone.
func (a *Auditor) publish(all []collected, skipped []string) {
	counts := map[[2]string]int{}
	next := make(map[pairKey]bool, len(all))
	for _, c := range all {
		counts[[2]string{c.violation.Rule, c.violation.Namespace}]++
		next[c.key] = true
		if a.seen[c.key] {
			continue
		}
		a.log.WithFields(logrus.Fields{
			"rule": c.violation.Rule, "node": c.violation.Node, "pods": c.violation.Pods, "reason": c.violation.Reason,
		}).Warn("placement violates a hard rule")
	}
	for k := range a.seen {
		if isSkipped(skipped, k.a) || (k.b != "" && isSkipped(skipped, k.b)) {
			next[k] = true
		}
	}
	a.seen = next
	a.announce(all, skipped)
	// Reset then set at once: a scrape in between is unlikely and would
	// only miss a pass.
	a.violations.Reset()
	for rn, n := range counts {
		a.violations.WithLabelValues(rn[0], rn[1]).Set(float64(n))
	}
}

// isSkipped reports whether pod is among skipped, which is sorted.
func isSkipped(skipped []string, pod string) bool {
	_, ok := slices.BinarySearch(skipped, pod)
	return ok
}
