package audit

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// masters returns n masters of cluster cache, each of its own shard, all
// on node-1 in namespace ns: n*(n-1)/2 violations of redis-masters.
func masters(ns string, n int) []runtime.Object {
	out := make([]runtime.Object, n)
	for i := range out {
		name := fmt.Sprintf("cache-%02d", i)
		out[i] = fixture.MakePod().Namespace(ns).Name(name).UID("uid-"+ns+"-"+name).Redis("cache", "master", fmt.Sprint(i)).Node("node-1").Obj()
	}
	return out
}

// TestEventsCapped: 40 masters crowded on one node break 780 pairs. The
// report lists all of them at every pass; each pass records at most one
// Event per pod and no more than its caps, counts the Events it left
// out, and the pods left out are told by the next passes, once.
func TestEventsCapped(t *testing.T) {
	tests := []struct {
		name               string
		namespaces         []string
		perPass, perNS     int // 0: the defaults
		wantEvents         []int
		wantSuppressed     []float64 // the counter after each pass
		wantViolationCount int
	}{
		{
			name:               "one namespace, default caps",
			namespaces:         []string{"shop"},
			wantEvents:         []int{20, 20, 0},
			wantSuppressed:     []float64{20, 20, 20},
			wantViolationCount: 780,
		},
		{
			name:               "two namespaces, cap per pass below the sum of the caps per namespace",
			namespaces:         []string{"blog", "shop"},
			perPass:            30,
			wantEvents:         []int{30, 30, 20, 0},
			wantSuppressed:     []float64{50, 70, 70, 70},
			wantViolationCount: 1560,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := nodes("node-1")
			for _, ns := range tt.namespaces {
				objs = append(objs, masters(ns, 40)...)
			}
			f := newHarness(t, objs...)
			if tt.perPass > 0 {
				f.auditor.eventsPerPass = tt.perPass
			}
			if tt.perNS > 0 {
				f.auditor.eventsPerNamespace = tt.perNS
			}
			told := map[string]int{}
			for pass, want := range tt.wantEvents {
				report := f.run(t)
				if len(report.Violations) != tt.wantViolationCount {
					t.Errorf("pass %d: %d violations reported, want %d", pass, len(report.Violations), tt.wantViolationCount)
				}
				events := f.recorder.take()
				if len(events) != want {
					t.Errorf("pass %d: %d events, want %d", pass, len(events), want)
				}
				perNS := map[string]int{}
				for _, e := range events {
					told[e.Regarding]++
					ns, _, _ := strings.Cut(e.Regarding, "/")
					perNS[ns]++
				}
				for ns, n := range perNS {
					if limit := f.auditor.eventsPerNamespace; n > limit {
						t.Errorf("pass %d: %d events in %s, over the cap of %d", pass, n, ns, limit)
					}
				}
				if got := testutil.ToFloat64(f.auditor.eventsSuppressed); got != tt.wantSuppressed[pass] {
					t.Errorf("pass %d: regosched_audit_events_suppressed_total = %v, want %v", pass, got, tt.wantSuppressed[pass])
				}
			}
			if len(told) != 40*len(tt.namespaces) {
				t.Errorf("%d pods told, want every one of %d", len(told), 40*len(tt.namespaces))
			}
			for pod, n := range told {
				if n != 1 {
					t.Errorf("%s told %d times, want once", pod, n)
				}
			}
		})
	}
}

// TestEventNotes: a pod with one new violation is told as before, with
// the rule's reason; one with several is told once, naming the rules and
// at most ten peers, then how many more.
func TestEventNotes(t *testing.T) {
	tests := []struct {
		name string
		pods []runtime.Object
		want event // the first pod's
	}{
		{
			name: "one violation",
			pods: masters("shop", 2),
			want: event{Regarding: "shop/cache-00", Related: "shop/cache-01", Type: "Warning", Reason: EventReason, Action: EventAction("redis-masters"),
				Note: "hard placement rule redis-masters is broken on node node-1 by this pod and shop/cache-01: redis: master shop/cache-01 of cluster cache already on this node"},
		},
		{
			name: "one rule, three peers",
			pods: masters("shop", 4),
			want: event{Regarding: "shop/cache-00", Related: "shop/cache-01", Type: "Warning", Reason: EventReason, Action: EventAction("redis-masters"),
				Note: "hard placement rule redis-masters is broken on node node-1 by this pod and 3 other pods: shop/cache-01, shop/cache-02, shop/cache-03"},
		},
		{
			name: "one rule, 39 peers",
			pods: masters("shop", 40),
			want: event{Regarding: "shop/cache-00", Related: "shop/cache-01", Type: "Warning", Reason: EventReason, Action: EventAction("redis-masters"),
				Note: "hard placement rule redis-masters is broken on node node-1 by this pod and 39 other pods: shop/cache-01, shop/cache-02, shop/cache-03, shop/cache-04, shop/cache-05, shop/cache-06, shop/cache-07, shop/cache-08, shop/cache-09, shop/cache-10 and 29 more"},
		},
		{
			name: "two rules",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-2").UID("uid-shop-cache-2").Redis("cache", "master", "1").Node("node-1").Obj(),
			},
			want: event{Regarding: "shop/cache-0", Related: "shop/cache-1", Type: "Warning", Reason: EventReason, Action: EventAction("redis-master-replica"),
				Note: "hard placement rules redis-master-replica, redis-masters are broken on node node-1 by this pod and 2 other pods: redis-master-replica with shop/cache-1; redis-masters with shop/cache-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newHarness(t, append(nodes("node-1"), tt.pods...)...)
			f.run(t)
			events := f.recorder.take()
			if len(events) == 0 {
				t.Fatal("no events")
			}
			if diff := cmp.Diff(tt.want, events[0]); diff != "" {
				t.Errorf("first event (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEventNoteFitsTheAPIServer: the API server rejects a note over 1,024
// bytes, and with it the Event; long names and reasons are cut to fit.
func TestEventNoteFitsTheAPIServer(t *testing.T) {
	long := strings.Repeat("é", 200) // two bytes each
	peer := func(i int) *model.Pod {
		return &model.Pod{Namespace: "tenant-" + strings.Repeat("n", 50), Name: fmt.Sprintf("%s-%d", strings.Repeat("p", 200), i)}
	}
	one := &news{pod: peer(0), node: "node-1", entries: []newsEntry{{rule: "r", peer: peer(1), reason: long + long + long}}}
	many := &news{pod: peer(0), node: "node-1"}
	for i := range 30 {
		many.entries = append(many.entries, newsEntry{rule: "r", peer: peer(i + 1), reason: long})
	}
	for name, n := range map[string]*news{"one violation with a long reason": one, "many long names": many} {
		t.Run(name, func(t *testing.T) {
			note := n.note()
			if len(note) > MaxNote {
				t.Errorf("note of %d bytes, over %d", len(note), MaxNote)
			}
			if !strings.HasPrefix(note, "hard placement rule r is broken on node node-1 by this pod and ") {
				t.Errorf("note = %q", note)
			}
			if len(n.entries) > 1 && !strings.HasSuffix(note, " more") {
				t.Errorf("note does not say how many peers it left out: %q", note)
			}
			if !utf8.ValidString(note) {
				t.Errorf("note cut inside a character: %q", note)
			}
		})
	}
}

// TestNewEventCaps: caps default when zero and are refused when negative.
func TestNewEventCaps(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	base := Config{Cache: emptyCache{}, Policies: func() *policy.Policy { return nil }, Log: log}
	tests := []struct {
		name          string
		perPass, perN int
		want          [2]int
		wantErr       bool
	}{
		{"defaults", 0, 0, [2]int{DefaultEventsPerPass, DefaultEventsPerNamespace}, false},
		{"given", 7, 3, [2]int{7, 3}, false},
		{"negative per pass", -1, 0, [2]int{}, true},
		{"negative per namespace", 0, -1, [2]int{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.EventsPerPass, cfg.EventsPerNamespace, cfg.Registerer = tt.perPass, tt.perN, prometheus.NewRegistry()
			a, err := New(cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New() error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, [2]int{a.eventsPerPass, a.eventsPerNamespace}); diff != "" {
				t.Errorf("caps (-want +got):\n%s", diff)
			}
		})
	}
}
