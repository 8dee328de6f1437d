package localstack

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// on binds p to node and returns it by value, for Violations' input.
func on(p *corev1.Pod, node string) corev1.Pod {
	p.Spec.NodeName = node
	return *p
}

func TestViolations(t *testing.T) {
	tests := []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{
			name: "redis masters of a cluster share a node",
			pods: []corev1.Pod{
				on(RedisPod("a", "cache", "m0", "master", "0"), "n1"),
				on(RedisPod("a", "cache", "m1", "master", "1"), "n1"),
			},
			want: []string{"node n1: a/m0 and a/m1 (two redis masters of a cluster)"},
		},
		{
			name: "master and replica of a shard share a node",
			pods: []corev1.Pod{
				on(RedisPod("a", "cache", "m0", "master", "0"), "n1"),
				on(RedisPod("a", "cache", "r0", "replica", "0"), "n1"),
			},
			want: []string{"node n1: a/m0 and a/r0 (redis master and replica of a shard)"},
		},
		{
			name: "slave is a replica",
			pods: []corev1.Pod{
				on(RedisPod("a", "cache", "s0", "slave", "0"), "n1"),
				on(RedisPod("a", "cache", "m0", "master", "0"), "n1"),
			},
			want: []string{"node n1: a/s0 and a/m0 (redis master and replica of a shard)"},
		},
		{
			name: "elasticsearch data pods of a cluster share a node",
			pods: []corev1.Pod{
				on(ESPod("a", "es", "d0", "data"), "n1"),
				on(ESPod("a", "es", "d1", "data"), "n1"),
			},
			want: []string{"node n1: a/d0 and a/d1 (two elasticsearch data pods of a cluster)"},
		},
		{
			name: "allowed neighbours",
			pods: []corev1.Pod{
				// Master and replica of different shards.
				on(RedisPod("a", "cache", "m0", "master", "0"), "n1"),
				on(RedisPod("a", "cache", "r1", "replica", "1"), "n1"),
				// Replicas of a shard.
				on(RedisPod("a", "cache", "r0", "replica", "0"), "n2"),
				on(RedisPod("a", "cache", "r0b", "replica", "0"), "n2"),
				// Same cluster name in another namespace.
				on(RedisPod("b", "cache", "m0", "master", "0"), "n1"),
				// Another cluster in the same namespace.
				on(RedisPod("a", "other", "m0", "master", "0"), "n1"),
				// Elasticsearch non-data roles, and a data pod next to them.
				on(ESPod("a", "es", "m0", "master"), "n3"),
				on(ESPod("a", "es", "m1", "master"), "n3"),
				on(ESPod("a", "es", "d0", "data"), "n3"),
				// Same instance label, different applications.
				on(ESPod("a", "cache", "d0x", "data"), "n1"),
				// Plain pods.
				on(PlainPod("a", "p0"), "n1"),
				on(PlainPod("a", "p1"), "n1"),
			},
		},
		{
			name: "pending and finished pods do not count",
			pods: func() []corev1.Pod {
				done := on(ESPod("a", "es", "d0", "data"), "n1")
				done.Status.Phase = corev1.PodSucceeded
				return []corev1.Pod{
					done,
					on(ESPod("a", "es", "d1", "data"), "n1"),
					*ESPod("a", "es", "d2", "data"),
					*ESPod("a", "es", "d3", "data"),
				}
			}(),
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
		{RedisPod("shop", "cache", "x", "master", "0"), "redis cache master, shard 0"},
		{ESPod("shop", "logs", "x", "data"), "elasticsearch logs data"},
		{PlainPod("shop", "x"), "plain pod"},
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
		{"redis", RedisPod("a", "c", "x", "master", "0").Labels, true},
		{"elasticsearch master role", ESPod("a", "c", "x", "master").Labels, true},
		{"no cluster", map[string]string{LabelName: "redis"}, false},
		{"other app", map[string]string{LabelName: "web", LabelInstance: "c"}, false},
		{"eck", map[string]string{LabelECKCluster: "c"}, true},
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
