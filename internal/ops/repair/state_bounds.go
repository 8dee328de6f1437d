package repair

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds of the state written, enforced before each write: a tenant that
// flips role labels adds a Failovers entry per cluster key and pass, and a
// state past the API server's 1 MiB object limit fails every write, the
// write-ahead record of a repair with it, so that no repair starts at all.
const (
	// maxFailovers caps the role changes kept: an entry matters only within
	// the cooldown, and 1,000 clusters whose roles changed within the hour
	// kept is far beyond a real fleet, while 1,000 of the longest keys
	// (three 63-character names and a timestamp, about 235 bytes) still fit
	// in maxStateBytes.
	maxFailovers = 1000
	// maxStateBytes caps the encoded state at a quarter of the 1 MiB limit,
	// which leaves room for the ConfigMap's metadata and managed fields and
	// keeps the read of each pass cheap, yet holds maxRecords records and
	// maxFailovers entries of the usual length (about 170 bytes each).
	maxStateBytes = 256 << 10
)

// Reasons of regosched_repair_state_dropped_total.
const (
	dropMaxEntries = "max_entries" // a role change beyond maxFailovers
	dropMaxBytes   = "max_bytes"   // a role change or a record beyond maxStateBytes
)

// stateMetrics counts what the bounds drop and the writes that fail; nil
// counts nothing.
type stateMetrics struct {
	dropped  *prometheus.CounterVec
	failures prometheus.Counter
}

func newStateMetrics() *stateMetrics {
	m := &stateMetrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_repair_state_dropped_total",
			Help: "Entries dropped from the repair state before a write to keep it within its bounds, by reason: max_entries (role changes beyond 1000; the namespace with the most loses its oldest first), max_bytes (role changes, then the oldest repair records, beyond 256 KiB encoded).",
		}, []string{"reason"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regosched_repair_state_write_failures_total",
			Help: "Writes of the repair state ConfigMap that failed (refused by the API server, a conflict with another writer, or not encoded); while they fail no repair starts, since each is written before it acts.",
		}),
	}
	// Both reasons show from the start, so that increase() sees the first drop.
	m.dropped.WithLabelValues(dropMaxEntries)
	m.dropped.WithLabelValues(dropMaxBytes)
	return m
}

// register registers m's counters with reg.
func (m *stateMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.dropped, m.failures} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering repair state metrics: %w", err)
		}
	}
	return nil
}

func (m *stateMetrics) countDropped(dropped drops) {
	if m == nil {
		return
	}
	for reason, n := range dropped.byReason {
		m.dropped.WithLabelValues(reason).Add(float64(n))
	}
}

func (m *stateMetrics) countFailure() {
	if m != nil {
		m.failures.Inc()
	}
}

// drops counts the entries dropped from a state, by reason and, for role
// changes, by namespace.
type drops struct {
	byReason    map[string]int
	byNamespace map[string]int
}

func (d drops) add(reason string, byNamespace map[string]int) {
	for ns, n := range byNamespace {
		d.byReason[reason] += n
		d.byNamespace[ns] += n
	}
}

// top is the n namespaces that lost the most role changes, the most first.
func (d drops) top(n int) []string {
	out := slices.Collect(maps.Keys(d.byNamespace))
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(d.byNamespace[b], d.byNamespace[a]), strings.Compare(a, b))
	})
	return out[:min(n, len(out))]
}

// encodeBounded drops from st what lies beyond maxEntries role changes and
// maxBytes encoded bytes, and encodes it. It never drops the repair in
// flight or the back-offs, which keep a repair from being sent twice or a
// failing one from being retried at once, and which grow no faster than
// --repair-max-per-hour lets repairs start.
func (st *state) encodeBounded(maxEntries, maxBytes int) ([]byte, drops, error) {
	dropped := drops{byReason: map[string]int{}, byNamespace: map[string]int{}}
	dropped.add(dropMaxEntries, trimFailovers(st.Failovers, maxEntries))
	raw, err := json.Marshal(st)
	// Role changes go first: they are what a tenant can flood.
	for err == nil && len(raw) > maxBytes && len(st.Failovers) > 0 {
		all, ferr := json.Marshal(st.Failovers)
		if ferr != nil {
			return nil, dropped, fmt.Errorf("encoding the role changes: %w", ferr)
		}
		// Enough entries of the average length, and one more, to come
		// under maxBytes; the loop checks the result.
		per := max(1, len(all)/len(st.Failovers))
		n := (len(raw)-maxBytes+per-1)/per + 1
		dropped.add(dropMaxBytes, trimFailovers(st.Failovers, len(st.Failovers)-n))
		raw, err = json.Marshal(st)
	}
	for err == nil && len(raw) > maxBytes && len(st.Done) > 0 {
		n, excess := 0, len(raw)-maxBytes
		for n < len(st.Done) && excess > 0 {
			r, rerr := json.Marshal(st.Done[n])
			if rerr != nil {
				return nil, dropped, fmt.Errorf("encoding a repair record: %w", rerr)
			}
			excess -= len(r) + 1 // and its comma
			n++
		}
		st.Done = st.Done[n:]
		dropped.byReason[dropMaxBytes] += n
		raw, err = json.Marshal(st)
	}
	if err != nil {
		return nil, dropped, fmt.Errorf("encoding the repair state: %w", err)
	}
	return raw, dropped, nil
}

// failoverEntry is one role change of state.Failovers.
type failoverEntry struct {
	key string
	at  time.Time
}

// trimFailovers deletes from m all but limit entries and returns how many
// it deleted of each namespace. Each namespace keeps its newest entries up
// to a fair share of limit, so that one namespace's flood loses its own
// oldest entries and never pushes out another namespace's few.
func trimFailovers(m map[string]time.Time, limit int) map[string]int {
	limit = max(limit, 0)
	if len(m) <= limit {
		return nil
	}
	byNS := map[string][]failoverEntry{}
	for k, at := range m {
		ns := clusterNamespace(k)
		byNS[ns] = append(byNS[ns], failoverEntry{key: k, at: at})
	}
	groups := make([][]failoverEntry, 0, len(byNS))
	for _, g := range byNS {
		slices.SortFunc(g, newestFirst)
		groups = append(groups, g)
	}
	dropped := map[string]int{}
	for i, keep := range fairShares(groups, limit) {
		for _, e := range groups[i][keep:] {
			delete(m, e.key)
		}
		if n := len(groups[i]) - keep; n > 0 {
			dropped[clusterNamespace(groups[i][0].key)] = n
		}
	}
	return dropped
}

// fairShares returns how many of each group's entries (newest first) to
// keep, limit in all: every group keeps all of its entries up to a level,
// and the slots left below the next level go to the groups whose next
// entry is the newest.
func fairShares(groups [][]failoverEntry, limit int) []int {
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	// By size, then by first key, for a result that does not depend on
	// the map's order.
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(len(groups[a]), len(groups[b])), strings.Compare(groups[a][0].key, groups[b][0].key))
	})
	keep := make([]int, len(groups))
	left := limit
	for j, i := range order {
		rest := len(order) - j
		if len(groups[i])*rest <= left {
			keep[i] = len(groups[i])
			left -= keep[i]
			continue
		}
		level := left / rest
		over := order[j:]
		for _, k := range over {
			keep[k] = level
		}
		slices.SortFunc(over, func(a, b int) int { return newestFirst(groups[a][level], groups[b][level]) })
		for _, k := range over[:left-level*rest] {
			keep[k]++
		}
		break
	}
	return keep
}

func newestFirst(a, b failoverEntry) int {
	return cmp.Or(b.at.Compare(a.at), strings.Compare(a.key, b.key))
}

// clusterNamespace is the namespace of a cluster key, the policy's peer key
// "<entry>/<namespace>/<cluster>"; a key of another form counts under "".
func clusterNamespace(key string) string {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		return ""
	}
	return parts[1]
}
