package shadow

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/fixture"
)

type static struct{ p *policy.Policy }

func (s static) Load() *policy.Policy { return s.p }

// stricterPolicy is the default policy that also keeps every two pods of a
// Redis cluster apart: it denies more than the default.
func stricterPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	return policytest.Variant(t, policytest.KeepClusterApart)
}

func newShadow(t testing.TB, pol *policy.Policy, cfg Config) (*Shadow, *logtest.Hook) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	cfg.Policies, cfg.Log, cfg.Nodes = static{pol}, log, fixture.Nodes{}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, hook
}

func TestDenied(t *testing.T) {
	pol := stricterPolicy(t)
	s, _ := newShadow(t, pol, Config{})
	tests := []struct {
		name  string
		pod   *model.Pod
		peers []*model.Pod
		want  []string // the nodes denied; reasons are the policy's wording
	}{
		{name: "no peers, nothing denied", pod: fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model(), want: []string{}},
		{
			name:  "a replica of another shard is kept apart by the stricter rule",
			pod:   fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model(),
			peers: []*model.Pod{fixture.MakePod().Namespace("shop").Name("r1").Redis("cache", "replica", "1").Node("node-3").Model()},
			want:  []string{"node-3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			denied, err := s.Denied(context.Background(), NewFilterRequest(tt.pod, tt.peers, []string{"node-1", "node-3"}))
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(maps.Keys(denied))
			if got == nil {
				got = []string{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Denied() nodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJudgeCountsAndSamplesDisagreements(t *testing.T) {
	pol := stricterPolicy(t)
	reg := prometheus.NewRegistry()
	s, hook := newShadow(t, pol, Config{LogsPerSecond: 1, Registerer: reg})
	pod := fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model()
	peers := []*model.Pod{
		fixture.MakePod().Namespace("shop").Name("r1").Redis("cache", "replica", "1").Node("node-3").Model(),
		fixture.MakePod().Namespace("shop").Name("r2").Redis("cache", "replica", "2").Node("node-4").Model(),
	}
	// The active policy allowed every node; the shadow denies node-3 and
	// node-4: two disagreements, one logged at one line a second.
	s.judge(context.Background(), NewFilterRequest(pod, peers, []string{"node-1", "node-3", "node-4"}))
	if got := testutil.ToFloat64(s.disagreements.WithLabelValues("filter")); got != 2 {
		t.Errorf("disagreements = %v, want 2", got)
	}
	if got := testutil.ToFloat64(s.unlogged); got != 1 {
		t.Errorf("unlogged = %v, want 1", got)
	}
	entries := hook.AllEntries()
	if len(entries) != 1 {
		t.Fatalf("logged %d lines, want 1", len(entries))
	}
	e := entries[0]
	got := map[string]any{"pod": e.Data["pod"], "verb": e.Data["verb"], "active": e.Data["active"], "level": e.Level}
	want := map[string]any{"pod": "shop/m0", "verb": "filter", "active": "allowed", "level": logrus.InfoLevel}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log line (-want +got):\n%s", diff)
	}
	if sh, _ := e.Data["shadow"].(string); !strings.HasPrefix(sh, "denied: ") {
		t.Errorf("shadow verdict %q, want denied: ...", sh)
	}
	if n, _ := e.Data["node"].(string); n != "node-3" && n != "node-4" {
		t.Errorf("node %q, want node-3 or node-4", n)
	}
}

func TestOfferDropsWhenFull(t *testing.T) {
	tests := []struct {
		name        string
		queue, offs int
		wantQueued  int
	}{
		{name: "room for all", queue: 4, offs: 3, wantQueued: 3},
		{name: "full queue drops the rest", queue: 2, offs: 50, wantQueued: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No workers run: nothing leaves the queue.
			s, _ := newShadow(t, stricterPolicy(t), Config{Queue: tt.queue})
			r := NewFilterRequest(fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model(), nil, []string{"node-1"})
			done := make(chan int)
			go func() {
				queued := 0
				for range tt.offs {
					if s.Offer(r) {
						queued++
					}
				}
				done <- queued
			}()
			select {
			case queued := <-done:
				got := map[string]float64{"queued": float64(queued), "dropped": testutil.ToFloat64(s.dropped.WithLabelValues("filter"))}
				want := map[string]float64{"queued": float64(tt.wantQueued), "dropped": float64(tt.offs - tt.wantQueued)}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Offer blocked on a full queue")
			}
		})
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	s, _ := newShadow(t, stricterPolicy(t), Config{Workers: 3})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	m0 := fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model()
	r1 := fixture.MakePod().Namespace("shop").Name("r1").Redis("cache", "replica", "1").Node("node-3").Model()
	for range 10 {
		s.Offer(NewFilterRequest(m0, []*model.Pod{r1}, []string{"node-3"}))
	}
	cancel()
	wg.Wait()
}

func TestJudgeComparesScoreOrder(t *testing.T) {
	tests := []struct {
		name       string
		active     []model.Penalty
		wantCount  float64
		wantLogged map[string]any
	}{
		{
			// The active policy preferred no node; the shadow's node
			// spreading puts node-3, where a peer runs, last.
			name: "shadow spreads, active did not", wantCount: 1,
			wantLogged: map[string]any{"verb": "prioritize", "pod": "shop/m0", "rank": 2, "active": "node-3 scores 10", "shadow": "node-4 scores 10"},
		},
		{
			name:      "same penalties, same order",
			active:    []model.Penalty{{TopologyKey: model.HostnameKey, Value: "node-3", Weight: 1}},
			wantCount: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, hook := newShadow(t, policytest.Default(t), Config{})
			// A replica of another shard of the cluster: no hard rule, but
			// the default policy spreads a cluster's pods over nodes.
			m0 := fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model()
			r1 := fixture.MakePod().Namespace("shop").Name("r1").Redis("cache", "replica", "1").Node("node-3").Model()
			r := NewFilterRequest(m0, []*model.Pod{r1}, []string{"node-1", "node-3", "node-4"})
			r.Penalties = tt.active
			s.judge(context.Background(), r)
			if got := testutil.ToFloat64(s.disagreements.WithLabelValues("prioritize")); got != tt.wantCount {
				t.Errorf("prioritize disagreements = %v, want %v", got, tt.wantCount)
			}
			var got map[string]any
			for _, e := range hook.AllEntries() {
				if e.Data["verb"] == "prioritize" {
					got = map[string]any(e.Data)
				}
			}
			if diff := cmp.Diff(tt.wantLogged, got); diff != "" {
				t.Errorf("log (-want +got):\n%s", diff)
			}
		})
	}
}
