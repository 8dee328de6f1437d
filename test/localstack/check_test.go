package localstack

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/test/fixture"
)

func TestViolations(t *testing.T) {
	tests := []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{
			name: "redis masters of a cluster share a node",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("a").Name("m0").Redis("cache", "master", "0").Node("n1").Obj(),
				*fixture.MakePod().Namespace("a").Name("m1").Redis("cache", "master", "1").Node("n1").Obj(),
			},
			want: []string{"node n1: a/m0 and a/m1 (two redis masters of a cluster)"},
		},
		{
			name: "master and replica of a shard share a node",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("a").Name("m0").Redis("cache", "master", "0").Node("n1").Obj(),
				*fixture.MakePod().Namespace("a").Name("r0").Redis("cache", "replica", "0").Node("n1").Obj(),
			},
			want: []string{"node n1: a/m0 and a/r0 (redis master and replica of a shard)"},
		},
		{
			name: "slave is a replica",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("a").Name("s0").Redis("cache", "slave", "0").Node("n1").Obj(),
				*fixture.MakePod().Namespace("a").Name("m0").Redis("cache", "master", "0").Node("n1").Obj(),
			},
			want: []string{"node n1: a/s0 and a/m0 (redis master and replica of a shard)"},
		},
		{
			name: "elasticsearch data pods of a cluster share a node",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("a").Name("d0").Elasticsearch("es", "data").Node("n1").Obj(),
				*fixture.MakePod().Namespace("a").Name("d1").Elasticsearch("es", "data").Node("n1").Obj(),
			},
			want: []string{"node n1: a/d0 and a/d1 (two elasticsearch data pods of a cluster)"},
		},
		{
			name: "allowed neighbours",
			pods: []corev1.Pod{
				// Master and replica of different shards.
				*fixture.MakePod().Namespace("a").Name("m0").Redis("cache", "master", "0").Node("n1").Obj(),
				*fixture.MakePod().Namespace("a").Name("r1").Redis("cache", "replica", "1").Node("n1").Obj(),
				// Replicas of a shard.
				*fixture.MakePod().Namespace("a").Name("r0").Redis("cache", "replica", "0").Node("n2").Obj(),
				*fixture.MakePod().Namespace("a").Name("r0b").Redis("cache", "replica", "0").Node("n2").Obj(),
				// Same cluster name in another namespace.
				*fixture.MakePod().Namespace("b").Name("m0").Redis("cache", "master", "0").Node("n1").Obj(),
				// Another cluster in the same namespace.
				*fixture.MakePod().Namespace("a").Name("m0").Redis("other", "master", "0").Node("n1").Obj(),
				// Elasticsearch non-data roles, and a data pod next to them.
				*fixture.MakePod().Namespace("a").Name("m0").Elasticsearch("es", "master").Node("n3").Obj(),
				*fixture.MakePod().Namespace("a").Name("m1").Elasticsearch("es", "master").Node("n3").Obj(),
				*fixture.MakePod().Namespace("a").Name("d0").Elasticsearch("es", "data").Node("n3").Obj(),
				// Same instance label, different applications.
				*fixture.MakePod().Namespace("a").Name("d0x").Elasticsearch("cache", "data").Node("n1").Obj(),
				// Plain pods.
				*fixture.MakePod().Namespace("a").Name("p0").Node("n1").Obj(),
				*fixture.MakePod().Namespace("a").Name("p1").Node("n1").Obj(),
			},
		},
		{
			name: "pending and finished pods do not count",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("a").Name("d0").Elasticsearch("es", "data").Node("n1").Phase(corev1.PodSucceeded).Obj(),
				*fixture.MakePod().Namespace("a").Name("d1").Elasticsearch("es", "data").Node("n1").Obj(),
				*fixture.MakePod().Namespace("a").Name("d2").Elasticsearch("es", "data").Obj(),
				*fixture.MakePod().Namespace("a").Name("d3").Elasticsearch("es", "data").Obj(),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Violations(tt.pods)); diff != "" {
				t.Errorf("Violations() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		pod  *corev1.Pod
		want string
	}{
		{fixture.MakePod().Namespace("shop").Name("x").Redis("cache", "master", "0").Obj(), "redis cache master, shard 0"},
		{fixture.MakePod().Namespace("shop").Name("x").Elasticsearch("logs", "data").Obj(), "elasticsearch logs data"},
		{fixture.MakePod().Namespace("shop").Name("x").Obj(), "plain pod"},
		{&corev1.Pod{}, "plain pod"},
	}
	for _, tt := range tests {
		if got := Describe(tt.pod.Labels); got != tt.want {
			t.Errorf("Describe(%v) = %q, want %q", tt.pod.Labels, got, tt.want)
		}
	}
}

func TestDefaultGrouped(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"redis", fixture.MakePod().Namespace("a").Name("x").Redis("c", "master", "0").Obj().Labels, true},
		{"elasticsearch master role", fixture.MakePod().Namespace("a").Name("x").Elasticsearch("c", "master").Obj().Labels, true},
		{"no cluster", map[string]string{fixture.LabelName: "redis"}, false},
		{"other app", map[string]string{fixture.LabelName: "web", fixture.LabelInstance: "c"}, false},
		{"eck", map[string]string{fixture.LabelECKCluster: "c"}, true},
		{"none", nil, false},
	}
	for _, tt := range tests {
		if got := DefaultGrouped(tt.labels); got != tt.want {
			t.Errorf("%s: DefaultGrouped() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseGauge(t *testing.T) {
	body := []byte(`# HELP regosched_cached_pods Bound pods.
# TYPE regosched_cached_pods gauge
regosched_cached_pods_other 7
regosched_cached_pods 12
`)
	got, err := parseGauge(body, "regosched_cached_pods")
	if err != nil || got != 12 {
		t.Errorf("parseGauge() = %d, %v; want 12, nil", got, err)
	}
	if _, err := parseGauge(body, "missing"); err == nil {
		t.Error("parseGauge() of a missing metric succeeded")
	}
}

func TestZoneViolations(t *testing.T) {
	zoneOf := map[string]string{"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
	redis := func(name, role, shard, node string) corev1.Pod {
		return *fixture.MakePod().Namespace("s").Name(name).Redis("cache", role, shard).Node(node).Obj()
	}
	tests := []struct {
		name   string
		zoneOf map[string]string
		pods   []corev1.Pod
		want   []string
	}{
		{
			name: "master and replica of a shard in one zone",
			pods: []corev1.Pod{redis("m0", "master", "0", "a1"), redis("r0", "replica", "0", "a2")},
			want: []string{"zone of s/cache/0/a: s/m0 and s/r0 (redis master and replica of a shard)"},
		},
		{
			name: "another shard's replica, or another zone: none",
			pods: []corev1.Pod{redis("m0", "master", "0", "a1"), redis("r1", "replica", "1", "a2"), redis("r0", "replica", "0", "b1")},
		},
		{
			name: "two of three masters in one zone",
			pods: []corev1.Pod{redis("m0", "master", "0", "a1"), redis("m1", "master", "1", "a2"), redis("m2", "master", "2", "b1")},
			want: []string{"zone a: 2 of the 3 redis masters of s/cache ([m0 m1]): half or more"},
		},
		{
			name:   "two zones cannot keep a majority of three: none",
			zoneOf: map[string]string{"a1": "a", "a2": "a", "b1": "b"},
			pods:   []corev1.Pod{redis("m0", "master", "0", "a1"), redis("m1", "master", "1", "a2"), redis("m2", "master", "2", "b1")},
		},
		{
			name: "a node without a zone is in none",
			pods: []corev1.Pod{redis("m0", "master", "0", "a1"), redis("r0", "replica", "0", "bare")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := zoneOf
			if tt.zoneOf != nil {
				z = tt.zoneOf
			}
			if diff := cmp.Diff(tt.want, ZoneViolations(tt.pods, z)); diff != "" {
				t.Errorf("ZoneViolations() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
