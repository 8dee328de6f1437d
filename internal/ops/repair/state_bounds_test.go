package repair

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// apiServerLimit is the most data a ConfigMap may hold.
const apiServerLimit = 1 << 20

// sizeLimited is a fake clientset that refuses a ConfigMap over the API
// server's limit, as the API server does.
func sizeLimited(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	refuse := func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.ConfigMap)
		if n := len(cm.Data[stateKey]); n > apiServerLimit {
			return true, nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("ConfigMap of %d bytes", n))
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "configmaps", refuse)
	client.PrependReactor("update", "configmaps", refuse)
	return client
}

// flood is n role changes in namespace ns, one a second before base, the
// newest first; its keys are as long as a tenant's usual ones.
func flood(ns string, n int, base time.Time) map[string]time.Time {
	out := make(map[string]time.Time, n)
	for i := range n {
		out[fmt.Sprintf("bitnami-redis-cluster/%s/sessions-renamed-by-a-tenant-flipping-its-role-labels-%05d", ns, i)] = base.Add(-time.Duration(i) * time.Second)
	}
	return out
}

// newest is the n newest keys of flood(ns, ...).
func newest(ns string, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("bitnami-redis-cluster/%s/sessions-renamed-by-a-tenant-flipping-its-role-labels-%05d", ns, i)
	}
	return out
}

// keysIn is the keys of m in namespace ns, sorted.
func keysIn(m map[string]time.Time, ns string) []string {
	var out []string
	for k := range m {
		if clusterNamespace(k) == ns {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// A tenant's flood of role changes is saved within the bounds, and keeps
// another namespace's few entries, even older ones, and the flood's
// newest; what is dropped is counted.
func TestSaveBoundsFailovers(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("n", 63)
	tests := []struct {
		name      string
		failovers map[string]time.Time
		done      int
		// wantKept are the keys kept by namespace; wantDropped the
		// counter's values by reason, or, with someBytesDropped, only
		// that some were dropped by size.
		wantKept         map[string][]string
		wantDropped      map[string]float64
		someBytesDropped bool
		// wantLogged is the namespaces the warning names, none without one.
		wantLogged []string
	}{
		{
			name:      "within the bounds: nothing dropped",
			failovers: merge(flood("shop", 5, now), flood("cache", 3, now)),
			wantKept:  map[string][]string{"shop": newest("shop", 5), "cache": newest("cache", 3)},
		},
		{
			name: "10,000 of one namespace beside 3 older of another",
			// The quiet namespace's entries are older than every entry of the flood.
			failovers:   merge(flood("noisy", 10000, now), flood("quiet", 3, now.Add(-24*time.Hour))),
			wantKept:    map[string][]string{"noisy": newest("noisy", maxFailovers-3), "quiet": newest("quiet", 3)},
			wantDropped: map[string]float64{dropMaxEntries: 10000 + 3 - maxFailovers},
			wantLogged:  []string{"noisy"},
		},
		{
			name:      "a flood in two namespaces shares the cap",
			failovers: merge(flood("a", 5000, now), flood("b", 700, now), flood("c", 10, now)),
			wantKept: map[string][]string{
				"a": newest("a", (maxFailovers-10)/2), "b": newest("b", (maxFailovers-10)/2), "c": newest("c", 10),
			},
			wantDropped: map[string]float64{dropMaxEntries: 5710 - maxFailovers},
			wantLogged:  []string{"a", "b"},
		},
		{
			// 1,000 keys of three 63-character names beside 256 records of
			// long pod names are over maxStateBytes: role changes go first.
			name:             "long names over the byte cap",
			failovers:        longKeys(long, maxFailovers, now),
			done:             maxRecords,
			someBytesDropped: true,
			wantLogged:       []string{long},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := sizeLimited()
			metrics := newStateMetrics()
			log, hook := logtest.NewNullLogger()
			s := store{kube: client, namespace: stateNS, name: DefaultConfigMap, log: log, metrics: metrics}
			st := &state{Failovers: tc.failovers, Done: records(tc.done, long, now),
				InFlight: &inFlight{Cluster: "redis/quiet/c", Action: Failover, Target: "quiet/c-1", Started: now}}
			if err := s.save(context.Background(), st); err != nil {
				t.Fatalf("save: %v", err)
			}
			cm, err := client.CoreV1().ConfigMaps(stateNS).Get(context.Background(), DefaultConfigMap, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			raw := cm.Data[stateKey]
			if len(raw) > maxStateBytes {
				t.Errorf("saved %d bytes, more than %d", len(raw), maxStateBytes)
			}
			saved := &state{}
			if err := json.Unmarshal([]byte(raw), saved); err != nil {
				t.Fatal(err)
			}
			if len(saved.Failovers) > maxFailovers {
				t.Errorf("saved %d role changes, more than %d", len(saved.Failovers), maxFailovers)
			}
			if saved.InFlight == nil {
				t.Error("the repair in flight was dropped")
			}
			if diff := cmp.Diff(st.Failovers, saved.Failovers); diff != "" {
				t.Errorf("the state kept differs from the one saved (-kept +saved):\n%s", diff)
			}
			for ns, want := range tc.wantKept {
				if diff := cmp.Diff(slices.Sorted(slices.Values(want)), keysIn(saved.Failovers, ns)); diff != "" {
					t.Errorf("role changes of %s kept (-want +got):\n%s", ns, diff)
				}
			}
			if tc.done > 0 && len(saved.Done) != tc.done {
				t.Errorf("saved %d records, want all %d: role changes go first", len(saved.Done), tc.done)
			}
			var logged []string
			for _, e := range hook.AllEntries() {
				if e.Level != logrus.WarnLevel {
					t.Errorf("logged %q at %s, want a warning", e.Message, e.Level)
				}
				logged = append(logged, e.Data["namespaces"].([]string)...)
			}
			if diff := cmp.Diff(tc.wantLogged, logged); diff != "" {
				t.Errorf("namespaces logged (-want +got):\n%s", diff)
			}
			got := map[string]float64{}
			for _, reason := range []string{dropMaxEntries, dropMaxBytes} {
				if v := testutil.ToFloat64(metrics.dropped.WithLabelValues(reason)); v != 0 {
					got[reason] = v
				}
			}
			if tc.someBytesDropped {
				if got[dropMaxBytes] == 0 || got[dropMaxEntries] != 0 {
					t.Errorf("dropped %v, want some by %s only", got, dropMaxBytes)
				}
				return
			}
			if diff := cmp.Diff(tc.wantDropped, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("regosched_repair_state_dropped_total (-want +got):\n%s", diff)
			}
		})
	}
}

func merge(ms ...map[string]time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// longKeys is n role changes with keys of three names of the longest
// length a label allows.
func longKeys(name string, n int, now time.Time) map[string]time.Time {
	out := make(map[string]time.Time, n)
	for i := range n {
		out[fmt.Sprintf("%s/%s/%s-%05d", name, name, name[:57], i)] = now.Add(-time.Duration(i) * time.Millisecond)
	}
	return out
}

// records is n repairs ended, oldest first, of pods with long names.
func records(n int, name string, now time.Time) []record {
	out := make([]record, n)
	for i := range out {
		at := now.Add(time.Duration(i-n) * time.Second)
		out[i] = record{Cluster: name + "/" + name + "/" + name, Action: Evict, Target: name + "/" + strings.Repeat("p", 253),
			Outcome: OutcomeFailed, Started: at, Ended: at}
	}
	return out
}

// The bounds by bytes drop role changes first, then the oldest records,
// and never the repair in flight or the back-offs.
func TestEncodeBoundedBytes(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		failovers   int
		done        int
		maxBytes    int
		wantDone    int // records kept, the newest
		wantNoRoles bool
	}{
		{"under the cap", 10, 10, 1 << 20, 10, false},
		{"role changes go first", 200, 10, 8 << 10, 10, false},
		{"then the oldest records", 200, 50, 4 << 10, -1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &state{Failovers: flood("ns", tc.failovers, now), Done: records(tc.done, "n", now),
				Backoff:  map[string]backoff{"redis/ns/c": {Until: now, Failures: 1}},
				InFlight: &inFlight{Cluster: "redis/ns/c", Started: now}}
			last := st.Done[len(st.Done)-1]
			raw, _, err := st.encodeBounded(maxFailovers, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) > tc.maxBytes {
				t.Errorf("encoded %d bytes, more than %d", len(raw), tc.maxBytes)
			}
			if tc.wantDone >= 0 && len(st.Done) != tc.wantDone {
				t.Errorf("kept %d records, want %d", len(st.Done), tc.wantDone)
			}
			if len(st.Done) == 0 || st.Done[len(st.Done)-1] != last {
				t.Error("the newest record was dropped")
			}
			if tc.wantNoRoles && len(st.Failovers) != 0 {
				t.Errorf("kept %d role changes and dropped records", len(st.Failovers))
			}
			if st.InFlight == nil || len(st.Backoff) != 1 {
				t.Error("the repair in flight or the back-off was dropped")
			}
		})
	}
}

// The fair share: a namespace under the level keeps all, the slots left
// go to the newest next entries, and the oldest are dropped.
func TestTrimFailovers(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name  string
		in    map[string]time.Time
		limit int
		want  []string
	}{
		{"within the limit", map[string]time.Time{"r/a/1": at(1), "r/b/1": at(2)}, 2, []string{"r/a/1", "r/b/1"}},
		{"the biggest namespace loses its oldest",
			map[string]time.Time{"r/a/1": at(1), "r/a/2": at(2), "r/a/3": at(3), "r/b/1": at(0)}, 3,
			[]string{"r/a/2", "r/a/3", "r/b/1"}},
		{"a slot left goes to the newer next entry",
			map[string]time.Time{"r/a/1": at(1), "r/a/2": at(4), "r/b/1": at(2), "r/b/2": at(5), "r/c/1": at(0)}, 4,
			[]string{"r/a/2", "r/b/1", "r/b/2", "r/c/1"}},
		{"keys of another form share one namespace",
			map[string]time.Time{"x": at(1), "y": at(2), "r/a/1": at(0)}, 2, []string{"r/a/1", "y"}},
		{"a limit of 0", map[string]time.Time{"r/a/1": at(1)}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := merge(tc.in)
			dropped := 0
			for _, n := range trimFailovers(m, tc.limit) {
				dropped += n
			}
			got := slices.Sorted(maps.Keys(m))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if want := len(tc.in) - len(tc.want); dropped != want {
				t.Errorf("dropped %d, want %d", dropped, want)
			}
		})
	}
}

// A write of the state that fails is counted and logged as an error.
func TestSaveFailureCounted(t *testing.T) {
	tests := []struct {
		name   string
		exists bool
		verb   string
		err    error
	}{
		{"create refused", false, "create", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, DefaultConfigMap, fmt.Errorf("RBAC"))},
		{"update refused", true, "update", apierrors.NewInternalError(fmt.Errorf("etcd unavailable"))},
		{"update too large", true, "update", apierrors.NewRequestEntityTooLargeError("limit is 1048576")},
		{"update in conflict", true, "update", apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, DefaultConfigMap, fmt.Errorf("changed"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.exists {
				objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: stateNS, Name: DefaultConfigMap, ResourceVersion: "1"}})
			}
			client := fake.NewClientset(objs...)
			client.PrependReactor(tc.verb, "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			log, hook := logtest.NewNullLogger()
			reg := prometheus.NewRegistry()
			metrics := newStateMetrics()
			if err := metrics.register(reg); err != nil {
				t.Fatal(err)
			}
			s := store{kube: client, namespace: stateNS, name: DefaultConfigMap, log: log, metrics: metrics}
			st, err := s.load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			st.rolesChanged("redis/shop/cache", time.Now())
			err = s.save(context.Background(), st)
			if err == nil || apierrors.ReasonForError(err) != apierrors.ReasonForError(tc.err) {
				t.Fatalf("save() = %v, want an error wrapping %v", err, tc.err)
			}
			if diff := cmp.Diff(1.0, testutil.ToFloat64(metrics.failures)); diff != "" {
				t.Errorf("regosched_repair_state_write_failures_total (-want +got):\n%s", diff)
			}
			if n, err := testutil.GatherAndCount(reg, "regosched_repair_state_write_failures_total"); err != nil || n != 1 {
				t.Errorf("registered failure series = %d, %v; want 1", n, err)
			}
			var levels []logrus.Level
			for _, e := range hook.AllEntries() {
				levels = append(levels, e.Level)
			}
			if diff := cmp.Diff([]logrus.Level{logrus.ErrorLevel}, levels); diff != "" {
				t.Errorf("log levels (-want +got):\n%s", diff)
			}
		})
	}
}
