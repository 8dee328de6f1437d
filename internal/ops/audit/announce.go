package audit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
)

const (
	// DefaultEventsPerPass caps the Warning Events of one pass, all
	// namespaces together, when Config.EventsPerPass is 0.
	DefaultEventsPerPass = 100
	// DefaultEventsPerNamespace caps them per namespace when
	// Config.EventsPerNamespace is 0.
	DefaultEventsPerNamespace = 20
	// MaxNote is the API server's limit on an Event's note, in bytes: a
	// longer one is rejected, and the Event lost.
	MaxNote = 1024
	// maxPeersListed bounds the peers one note names; the rest are counted.
	maxPeersListed = 10
)

// side is a violation as one of its pods is told of it: pod broke rule
// with peer (namespace/name each).
type side struct{ rule, pod, peer string }

// news is what one pod has not been told of yet: its violations on its
// node, sorted by rule then peer.
type news struct {
	pod     *model.Pod
	node    string
	entries []newsEntry
}

type newsEntry struct {
	rule   string
	peer   *model.Pod
	reason string // the reason given for pod, "" when the rule gave none
}

// announce records one Warning Event per pod that has violations it was
// not told of, naming them all, within the caps per namespace and per
// pass. A pod left out by a cap is not told and is announced by a later
// pass while its violations last; the Events left out are counted and
// logged. A pod is told of a violation once while it lasts; a violation
// of a skipped pod is kept as told (unknown, not gone).
func (a *Auditor) announce(all []collected, skipped []string) {
	if a.recorder == nil {
		return
	}
	told := make(map[side]bool, len(a.told))
	byPod := map[string]*news{}
	for _, c := range all {
		for i, pod := range c.found.pods {
			peer := c.found.pods[1-i]
			s := side{rule: c.violation.Rule, pod: pod.Key(), peer: peer.Key()}
			if a.told[s] {
				told[s] = true
				continue
			}
			n := byPod[s.pod]
			if n == nil {
				n = &news{pod: pod, node: pod.Node}
				byPod[s.pod] = n
			}
			n.entries = append(n.entries, newsEntry{rule: s.rule, peer: peer, reason: c.found.reasons[i]})
		}
	}
	for s := range a.told {
		if isSkipped(skipped, s.pod) || isSkipped(skipped, s.peer) {
			told[s] = true
		}
	}
	pods := make([]*news, 0, len(byPod))
	for _, n := range byPod {
		pods = append(pods, n)
	}
	slices.SortFunc(pods, func(x, y *news) int { return strings.Compare(x.pod.Key(), y.pod.Key()) })

	recorded, suppressed := 0, 0
	perNamespace := map[string]int{}
	suppressedIn := map[string]int{}
	for _, n := range pods {
		ns := n.pod.Namespace
		if recorded >= a.eventsPerPass || perNamespace[ns] >= a.eventsPerNamespace {
			suppressed++
			suppressedIn[ns]++
			continue
		}
		recorded++
		perNamespace[ns]++
		first := n.sortEntries()
		a.recorder.Eventf(PodRef(n.pod), PodRef(first.peer), corev1.EventTypeWarning, EventReason, EventAction(first.rule), "%s", n.note())
		for _, e := range n.entries {
			told[side{rule: e.rule, pod: n.pod.Key(), peer: e.peer.Key()}] = true
		}
	}
	a.told = told
	if suppressed > 0 {
		a.eventsSuppressed.Add(float64(suppressed))
		a.log.WithFields(logrus.Fields{
			"recorded": recorded, "suppressed": suppressed, "byNamespace": suppressedIn,
			"eventsPerPass": a.eventsPerPass, "eventsPerNamespace": a.eventsPerNamespace,
		}).Warn("audit: Events of placement violations left for later passes (cap per pass reached)")
	}
}

// sortEntries sorts n's entries by rule and peer and returns the first,
// which the Event names as its action and related object.
func (n *news) sortEntries() newsEntry {
	slices.SortFunc(n.entries, func(x, y newsEntry) int {
		return cmp.Or(strings.Compare(x.rule, y.rule), strings.Compare(x.peer.Key(), y.peer.Key()))
	})
	return n.entries[0]
}

// note is the message of n's Event. One violation reads as it always has,
// with the rule's reason; several list the rules and the peers, at most
// maxPeersListed and within MaxNote bytes, then how many are left out.
func (n *news) note() string {
	if len(n.entries) == 1 {
		e := n.entries[0]
		note := fmt.Sprintf("hard placement rule %s is broken on node %s by this pod and %s", e.rule, n.node, e.peer.Key())
		if e.reason != "" {
			note += ": " + e.reason
		}
		return Truncate(note, MaxNote)
	}
	var rules []string
	peers := map[string]bool{}
	for _, e := range n.entries {
		if len(rules) == 0 || rules[len(rules)-1] != e.rule {
			rules = append(rules, e.rule)
		}
		peers[e.peer.Key()] = true
	}
	var b strings.Builder
	if len(rules) == 1 {
		fmt.Fprintf(&b, "hard placement rule %s is broken on node %s by this pod and %d other pods: ", rules[0], n.node, len(peers))
	} else {
		fmt.Fprintf(&b, "hard placement rules %s are broken on node %s by this pod and %d other pods: ", strings.Join(rules, ", "), n.node, len(peers))
	}
	// The suffix " and N more" needs room whatever is listed.
	const room = len(" and 99999999 more")
	listed := 0
	for i, e := range n.entries {
		item := e.peer.Key()
		if len(rules) > 1 && (i == 0 || n.entries[i-1].rule != e.rule) {
			item = e.rule + " with " + item
		}
		sep := ", "
		switch {
		case i == 0:
			sep = ""
		case n.entries[i-1].rule != e.rule:
			sep = "; "
		}
		if listed == maxPeersListed || b.Len()+len(sep)+len(item)+room > MaxNote {
			break
		}
		b.WriteString(sep + item)
		listed++
	}
	if rest := len(n.entries) - listed; rest > 0 {
		fmt.Fprintf(&b, " and %d more", rest)
	}
	return Truncate(b.String(), MaxNote)
}

// Truncate cuts s to at most limit bytes, on a rune boundary.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	for limit > 0 && !utf8.RuneStart(s[limit]) {
		limit--
	}
	return s[:limit]
}

// PodRef is the object reference of a cached pod, which keeps no full
// object, for the Events about it.
func PodRef(p *model.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}
