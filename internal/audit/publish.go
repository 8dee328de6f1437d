package audit

import (
	"fmt"
	"slices"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/placement"
)

// publish refills the gauge, announces the violations the previous pass
// did not have, and remembers this pass's for the next. A violation of a
// skipped pod stays remembered: it is unknown, not gone.
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
		a.announce(c)
	}
	for k := range a.seen {
		if isSkipped(skipped, k.a) || (k.b != "" && isSkipped(skipped, k.b)) {
			next[k] = true
		}
	}
	a.seen = next
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

// announce records a Warning Event on each pod of a new violation, naming
// the rule, the node and the other pod.
func (a *Auditor) announce(c collected) {
	if a.recorder == nil {
		return
	}
	f := c.found
	for side, pod := range f.pods {
		other := f.pods[1-side]
		note := fmt.Sprintf("hard placement rule %s is broken on node %s by this pod and %s", c.violation.Rule, f.node, other.Key())
		if reason := f.reasons[side]; reason != "" {
			note += ": " + reason
		}
		a.recorder.Eventf(ref(pod), ref(other), corev1.EventTypeWarning, EventReason, EventAction(c.violation.Rule), "%s", note)
	}
}

// ref is the object reference of a cached pod, which keeps no full object.
func ref(p *placement.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}
