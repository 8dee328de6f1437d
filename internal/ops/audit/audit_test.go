package audit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods []runtime.Object
		// ungrouped: pods no rule applies to, which the audit does not count.
		ungrouped int
		want      []Violation
	}{
		{
			name: "two masters of one cluster on one node",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-2").UID("uid-shop-cache-2").Redis("cache", "master", "1").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-2").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-3").UID("uid-shop-cache-3").Redis("cache", "replica", "1").Node("node-3").Obj(),
			},
			want: []Violation{{
				Rule: "redis-masters", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-2"},
				Reason: "redis: master shop/cache-2 of cluster cache already on this node",
			}},
		},
		{
			name: "master and replica of one shard on one node",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-1").Obj(),
			},
			// Sharing node-1, they share its zone-0 too: the rule per zone is broken as well.
			want: []Violation{
				{
					Rule: "redis-master-replica", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
					Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already on this node",
				},
				{
					Rule: "redis-master-replica-zones", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
					Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already in zone zone-0",
				},
			},
		},
		{
			name: "slave is a replica",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "slave", "0").Node("node-1").Obj(),
			},
			// Sharing node-1, they share its zone-0 too: the rule per zone is broken as well.
			want: []Violation{
				{
					Rule: "redis-master-replica", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
					Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already on this node",
				},
				{
					Rule: "redis-master-replica-zones", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
					Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already in zone zone-0",
				},
			},
		},
		{
			name: "master and replica of different shards share a node",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-3").UID("uid-shop-cache-3").Redis("cache", "replica", "1").Node("node-1").Obj(),
			},
		},
		{
			name: "two replicas share a node",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-3").UID("uid-shop-cache-3").Redis("cache", "replica", "0").Node("node-1").Obj(),
			},
		},
		{
			name: "masters of different clusters share a node",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("sessions-0").UID("uid-shop-sessions-0").Redis("sessions", "master", "0").Node("node-1").Obj(),
			},
		},
		{
			name: "masters of clusters of one name in different namespaces share a node",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("blog").Name("cache-0").UID("uid-blog-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
			},
		},
		{
			name: "masters on different nodes",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-2").UID("uid-shop-cache-2").Redis("cache", "master", "1").Node("node-2").Obj(),
			},
		},
		{
			name: "three masters on one node are three pairs",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-2").UID("uid-shop-cache-2").Redis("cache", "master", "1").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-4").UID("uid-shop-cache-4").Redis("cache", "master", "2").Node("node-1").Obj(),
			},
			want: []Violation{
				{
					Rule: "redis-masters", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-2"},
					Reason: "redis: master shop/cache-2 of cluster cache already on this node",
				},
				{
					Rule: "redis-masters", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-4"},
					Reason: "redis: master shop/cache-4 of cluster cache already on this node",
				},
				{
					Rule: "redis-masters", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-2", "shop/cache-4"},
					Reason: "redis: master shop/cache-4 of cluster cache already on this node",
				},
				// Three masters over three zones may hold one per zone: zone-0 holds all three.
				{
					Rule: "redis-masters-quorum", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-2"},
					Reason: "redis: master shop/cache-2 of cluster cache already in zone zone-0: with this pod 3 of 3 there, fewer than half may be",
				},
				{
					Rule: "redis-masters-quorum", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-4"},
					Reason: "redis: master shop/cache-4 of cluster cache already in zone zone-0: with this pod 3 of 3 there, fewer than half may be",
				},
				{
					Rule: "redis-masters-quorum", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-2", "shop/cache-4"},
					Reason: "redis: master shop/cache-4 of cluster cache already in zone zone-0: with this pod 3 of 3 there, fewer than half may be",
				},
			},
		},
		{
			name: "Elasticsearch data pods of one cluster on one node",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("search").Name("logs-data-0").UID("uid-search-logs-data-0").Elasticsearch("logs", "data").Node("node-1").Obj(),
				fixture.MakePod().Namespace("search").Name("logs-data-1").UID("uid-search-logs-data-1").Elasticsearch("logs", "data").Node("node-1").Obj(),
				fixture.MakePod().Namespace("search").Name("logs-data-2").UID("uid-search-logs-data-2").Elasticsearch("logs", "data").Node("node-2").Obj(),
				fixture.MakePod().Namespace("search").Name("metrics-data-0").UID("uid-search-metrics-data-0").Elasticsearch("metrics", "data").Node("node-1").Obj(),
			},
			want: []Violation{{
				Rule: "elasticsearch-data", Namespace: "search", Node: "node-1", Pods: []string{"search/logs-data-0", "search/logs-data-1"},
				Reason: "elasticsearch: data search/logs-data-1 of cluster logs already on this node",
			}},
		},
		{
			name: "violations of several rules, namespaces and nodes are sorted",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("search").Name("logs-data-0").UID("uid-search-logs-data-0").Elasticsearch("logs", "data").Node("node-2").Obj(),
				fixture.MakePod().Namespace("search").Name("logs-data-1").UID("uid-search-logs-data-1").Elasticsearch("logs", "data").Node("node-2").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("blog").Name("cache-0").UID("uid-blog-cache-0").Redis("cache", "master", "0").Node("node-3").Obj(),
				fixture.MakePod().Namespace("blog").Name("cache-1").UID("uid-blog-cache-1").Redis("cache", "replica", "0").Node("node-3").Obj(),
			},
			want: []Violation{
				{
					Rule: "elasticsearch-data", Namespace: "search", Node: "node-2", Pods: []string{"search/logs-data-0", "search/logs-data-1"},
					Reason: "elasticsearch: data search/logs-data-1 of cluster logs already on this node",
				},
				{
					Rule: "redis-master-replica", Namespace: "blog", Node: "node-3", Pods: []string{"blog/cache-0", "blog/cache-1"},
					Reason: "redis: replica blog/cache-1 of cluster cache (shard 0) already on this node",
				},
				{
					Rule: "redis-master-replica", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
					Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already on this node",
				},
				// Each Redis pair shares its node's zone too (node-3 is zone-2, node-1 zone-0).
				{
					Rule: "redis-master-replica-zones", Namespace: "blog", Node: "node-3", Pods: []string{"blog/cache-0", "blog/cache-1"},
					Reason: "redis: replica blog/cache-1 of cluster cache (shard 0) already in zone zone-2",
				},
				{
					Rule: "redis-master-replica-zones", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
					Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already in zone zone-0",
				},
			},
		},
		{
			name: "pods no rule applies to",
			pods: []runtime.Object{
				fixture.MakePod().Namespace("web").Name("front-0").UID("uid-web-front-0").Label("app", "front").Node("node-1").Obj(),
				fixture.MakePod().Namespace("web").Name("front-1").UID("uid-web-front-1").Label("app", "front").Node("node-1").Obj(),
			},
			ungrouped: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHarness(t, append(nodes("node-1", "node-2", "node-3"), tc.pods...)...)
			got := f.run(t)
			if got.PolicyRevision == "" {
				t.Error("no policy revision")
			}
			want := Report{Violations: tc.want, PolicyRevision: got.PolicyRevision, Pods: len(tc.pods) - tc.ungrouped}
			if want.Violations == nil {
				want.Violations = []Violation{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Run() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEventsAndGauge follows one cluster through failovers: a violation is
// announced once, on both pods, while the gauge counts it at every pass.
func TestEventsAndGauge(t *testing.T) {
	m0 := fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj()
	r1 := fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-2").Obj()
	m2 := fixture.MakePod().Namespace("shop").Name("cache-2").UID("uid-shop-cache-2").Redis("cache", "master", "1").Node("node-2").Obj()
	r3 := fixture.MakePod().Namespace("shop").Name("cache-3").UID("uid-shop-cache-3").Redis("cache", "replica", "1").Node("node-1").Obj()
	f := newHarness(t, append(nodes("node-1", "node-2", "node-3"), m0, r1, m2, r3)...)
	// failover swaps the roles of shard 1's pods, in place, as a Redis
	// failover relabels them.
	failover := func(t *testing.T) {
		for _, p := range []*corev1.Pod{m2, r3} {
			if p.Labels["app.kubernetes.io/component"] == "master" {
				p.Labels = fixture.RedisLabels("cache", "replica", "1")
			} else {
				p.Labels = fixture.RedisLabels("cache", "master", "1")
			}
			f.apply(t, p)
		}
	}
	// warn is the Event on pod, whose action names the note's first rule.
	warn := func(pod, other, note string) event {
		rules, ok := strings.CutPrefix(note, "hard placement rules ")
		if !ok {
			rules = strings.TrimPrefix(note, "hard placement rule ")
		}
		rule := rules[:strings.IndexAny(rules, ", ")]
		return event{Regarding: pod, Related: other, Type: "Warning", Reason: EventReason, Action: EventAction(rule), Note: note}
	}
	mastersOn1 := []event{
		warn("shop/cache-0", "shop/cache-3", "hard placement rule redis-masters is broken on node node-1 by this pod and shop/cache-3: redis: master shop/cache-3 of cluster cache already on this node"),
		warn("shop/cache-3", "shop/cache-0", "hard placement rule redis-masters is broken on node node-1 by this pod and shop/cache-0: redis: master shop/cache-0 of cluster cache already on this node"),
	}
	const (
		mastersGauge = `regosched_violations{namespace="shop",rule="redis-masters"} 1`
		// A master and replica of one shard on one node share its zone too.
		shardGauge = `regosched_violations{namespace="shop",rule="redis-master-replica"} 1` + "\n" +
			`regosched_violations{namespace="shop",rule="redis-master-replica-zones"} 1`
	)
	for _, step := range []struct {
		name   string
		change func(t *testing.T)
		events []event
		gauge  string // the series of regosched_violations; none when empty
	}{
		{name: "placements that break no rule"},
		{
			name:   "a failover puts two masters on node-1: announced on both",
			change: failover,
			events: mastersOn1,
			gauge:  mastersGauge,
		},
		{
			name:  "a lasting violation is not announced again",
			gauge: mastersGauge,
		},
		{
			name: "a replica recreated next to its master",
			change: func(t *testing.T) {
				f.remove(t, r1)
				r1.Spec.NodeName = "node-1"
				f.apply(t, r1)
			},
			// Next to its master, the replica breaks the rule per zone too: one Event per pod names both.
			events: []event{
				warn("shop/cache-0", "shop/cache-1", "hard placement rules redis-master-replica, redis-master-replica-zones are broken on node node-1 by this pod and 1 other pods: "+
					"redis-master-replica with shop/cache-1; redis-master-replica-zones with shop/cache-1"),
				warn("shop/cache-1", "shop/cache-0", "hard placement rules redis-master-replica, redis-master-replica-zones are broken on node node-1 by this pod and 1 other pods: "+
					"redis-master-replica with shop/cache-0; redis-master-replica-zones with shop/cache-0"),
			},
			gauge: shardGauge + "\n" + mastersGauge,
		},
		{
			name:   "a failover back ends a violation: it leaves the gauge",
			change: failover,
			gauge:  shardGauge,
		},
		{
			name:   "a violation that comes back is announced again",
			change: failover,
			events: mastersOn1,
			gauge:  shardGauge + "\n" + mastersGauge,
		},
	} {
		if step.change != nil {
			step.change(t)
		}
		f.run(t)
		if diff := cmp.Diff(step.events, f.recorder.take()); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", step.name, diff)
		}
		want := ""
		if step.gauge != "" {
			want = "# HELP regosched_violations Pairs of bound pods that break a hard placement rule on their node, by rule and namespace, as of the last audit pass.\n" +
				"# TYPE regosched_violations gauge\n" + step.gauge + "\n"
		}
		if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "regosched_violations"); err != nil {
			t.Errorf("%s: %v", step.name, err)
		}
	}
	if got := testutil.ToFloat64(f.auditor.runs.WithLabelValues("success")); got != 6 {
		t.Errorf("regosched_audit_runs_total{result=success} = %v, want 6", got)
	}
	if got := testutil.CollectAndCount(f.auditor.duration); got != 1 {
		t.Errorf("regosched_audit_duration_seconds series = %d, want 1", got)
	}
}

func TestRunWithoutPolicy(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	a, err := New(Config{Cache: emptyCache{}, Policies: func() *policy.Policy { return nil }, Log: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(context.Background()); !errors.Is(err, ErrNoPolicy) {
		t.Errorf("Run() error = %v, want ErrNoPolicy", err)
	}
	if got := testutil.ToFloat64(a.runs.WithLabelValues("error")); got != 1 {
		t.Errorf("regosched_audit_runs_total{result=error} = %v, want 1", got)
	}
}

func TestNewRequiresCachePoliciesAndLog(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New(Config{}) succeeded")
	}
}

type emptyCache struct{}

func (emptyCache) Indexed() []placement.Indexed                { return nil }
func (emptyCache) Peers([]string, types.UID) []*model.Pod      { return nil }
func (emptyCache) Domains(string) int                          { return 0 }
func (emptyCache) NodeLabels(string) (map[string]string, bool) { return nil, false }
func (emptyCache) Replicas(string, string) (int, bool)         { return 0, false }
