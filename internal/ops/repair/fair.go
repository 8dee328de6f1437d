package repair

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/regosched/regosched/internal/ops/audit"
)

// turns is the fair order of the passes: no namespace's count of
// violations may push another's out of a pass, and no namespace's slow
// Redis may spend another's share of the pass time.
type turns struct {
	// firstSeen is when a pass first saw each violation (violationKey):
	// the oldest are repaired first. A new leader starts it afresh.
	firstSeen map[string]time.Time
	// cursor is the namespace served last: the next pass begins after it.
	cursor string
}

// order returns vs as the pass plans them: round robin over namespaces,
// beginning after the cursor; within a namespace, round robin over its
// clusters, the one with the oldest violation first; within a cluster,
// the oldest violation first. It also forgets the violations gone.
func (t *turns) order(vs []audit.Violation, clusterOf func(audit.Violation) string, now time.Time) []audit.Violation {
	seen := make(map[string]time.Time, len(vs))
	byNS := map[string][]queued{}
	for _, v := range vs {
		k := violationKey(v)
		at, ok := t.firstSeen[k]
		if !ok {
			at = now
		}
		seen[k] = at
		byNS[v.Namespace] = append(byNS[v.Namespace], queued{v: v, cluster: clusterOf(v), at: at})
	}
	t.firstSeen = seen

	namespaces := make([][]audit.Violation, 0, len(byNS))
	for _, ns := range t.rotation(byNS) {
		items := byNS[ns]
		// The audit's order (rule, node, pods) breaks ties: stable.
		slices.SortStableFunc(items, func(a, b queued) int { return a.at.Compare(b.at) })
		var clusters [][]audit.Violation
		index := map[string]int{}
		for _, it := range items {
			i, ok := index[it.cluster]
			if !ok {
				i = len(clusters)
				index[it.cluster] = i
				clusters = append(clusters, nil)
			}
			clusters[i] = append(clusters[i], it.v)
		}
		namespaces = append(namespaces, interleave(clusters))
	}
	return interleave(namespaces)
}

// rotation is the namespaces of byNS by name, beginning after the cursor.
func (t *turns) rotation(byNS map[string][]queued) []string {
	names := make([]string, 0, len(byNS))
	for ns := range byNS {
		names = append(names, ns)
	}
	slices.Sort(names)
	i, _ := slices.BinarySearch(names, t.cursor)
	if i < len(names) && names[i] == t.cursor {
		i++
	}
	return append(names[i:len(names):len(names)], names[:i]...)
}

// queued is a violation waiting for its turn.
type queued struct {
	v       audit.Violation
	cluster string
	at      time.Time
}

// interleave takes one of each list in turn, until all are taken.
func interleave(lists [][]audit.Violation) []audit.Violation {
	var out []audit.Violation
	for i := 0; ; i++ {
		took := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
				took = true
			}
		}
		if !took {
			return out
		}
	}
}

// passClock shares one pass's planning time among the namespaces that
// have violations: each gets PassTimeout divided among them, at least
// minShare, so a tenant whose Redis answers slowly spends its own share.
type passClock struct {
	share time.Duration
	spent map[string]time.Duration
	now   func() time.Time
}

// minShare is the least planning time of a namespace in a pass: enough
// for a Redis probe or two and an API read.
const minShare = 2 * time.Second

func newPassClock(vs []audit.Violation, passTimeout time.Duration, now func() time.Time) *passClock {
	namespaces := map[string]bool{}
	for _, v := range vs {
		namespaces[v.Namespace] = true
	}
	share := passTimeout
	if n := len(namespaces); n > 1 {
		share = max(passTimeout/time.Duration(n), minShare)
	}
	return &passClock{share: share, spent: map[string]time.Duration{}, now: now}
}

// plan runs plan with what is left of ns's share as its deadline, and
// reports false, without planning, when nothing is left.
func (c *passClock) plan(ctx context.Context, ns string, plan func(context.Context) Step) (Step, bool) {
	left := c.share - c.spent[ns]
	if left <= 0 {
		return Step{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	start := c.now()
	s := plan(ctx)
	c.spent[ns] += c.now().Sub(start)
	return s, true
}

// budget is the hourly budget (--repair-max-per-hour) as one pass shares
// it: each namespace with violations, or with repairs in the last hour,
// may start its share, and what a namespace started beyond its share
// (when it was alone, say) does not count against the others.
type budget struct {
	max, share int
	namespaces int
	started    map[string]int
	counted    int
}

func newBudget(st *state, vs []audit.Violation, maxPerHour int, now time.Time) budget {
	b := budget{max: maxPerHour, started: map[string]int{}}
	active := map[string]bool{}
	for _, v := range vs {
		active[v.Namespace] = true
	}
	count := func(target string, started time.Time) {
		if now.Sub(started) < time.Hour {
			ns, _, _ := strings.Cut(target, "/")
			b.started[ns]++
			active[ns] = true
		}
	}
	for _, r := range st.Done {
		count(r.Target, r.Started)
	}
	if f := st.InFlight; f != nil {
		count(f.Target, f.Started)
	}
	b.namespaces = max(len(active), 1)
	b.share = max(maxPerHour/b.namespaces, 1)
	for _, n := range b.started {
		b.counted += min(n, b.share)
	}
	return b
}

// hold says why ns may not start a repair now, or "".
func (b budget) hold(ns string) string {
	if b.max == 0 {
		return "--repair-max-per-hour is 0"
	}
	if b.counted >= b.max {
		return fmt.Sprintf("%d repairs were started in the last hour, the most --repair-max-per-hour allows", b.counted)
	}
	if n := b.started[ns]; n >= b.share {
		return fmt.Sprintf("%d repairs of namespace %s were started in the last hour, its share of --repair-max-per-hour (%d among %d namespaces)",
			n, ns, b.max, b.namespaces)
	}
	return ""
}

// namespaceOf is the namespace of a violation's repair.
func namespaceOf(s Step) string {
	return cmp.Or(s.Violation.Namespace, strings.SplitN(s.Target, "/", 2)[0])
}
