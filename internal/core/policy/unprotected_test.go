package policy

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
)

func TestUnprotected(t *testing.T) {
	pol := mustDefaultPolicy(t)
	redis := func(component string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": component}
	}
	with := func(m map[string]string, k, v string) map[string]string { m[k] = v; return m }
	tests := []struct {
		name   string
		labels map[string]string
		want   []Unprotected
	}{
		{"protected master", redis("master"), nil},
		{"no workload", map[string]string{"app": "web"},
			[]Unprotected{{"no_workload", "no workload of the policy matches the pod's labels"}}},
		{"redis without a role", redis("node"),
			[]Unprotected{{"role_unknown", "redis: the pod's labels name no role of workload redis (cluster cache); no hard rule applies to it"}}},
		{"host-networked redis, its live role cleared", with(redis("node"), UnreadableLabel, HostNetwork), []Unprotected{
			{"host_network", "the pod shares its node's network (hostNetwork, or its IP is its node's): regosched does not ask its Redis, so its live role stays unknown"},
			{"role_unknown", "redis: the pod's labels name no role of workload redis (cluster cache); no hard rule applies to it"},
		}},
		{"host-networked, a role from its chart", with(redis("master"), UnreadableLabel, HostNetwork), []Unprotected{
			{"host_network", "the pod shares its node's network (hostNetwork, or its IP is its node's): regosched does not ask its Redis, so its live role stays unknown"},
		}},
		{"another unreadable reason is not host_network", with(redis("master"), UnreadableLabel, "other"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &model.Pod{Namespace: "shop", Name: "p", UID: "u", Labels: model.NewLabels(tt.labels)}
			got, err := pol.Unprotected(context.Background(), pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Unprotected() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Each unprotected pod is counted and logged once, however often it is
// described again (a relabel, a policy swap).
func TestUnprotectedWatchReportsOnce(t *testing.T) {
	pol := mustDefaultPolicy(t)
	reg := prometheus.NewRegistry()
	log, hook := logtest.NewNullLogger()
	w, err := NewUnprotectedWatch(reg, log)
	if err != nil {
		t.Fatal(err)
	}
	describe := PendingDescriber(func() *Policy { return pol }, w)
	pods := []struct {
		uid    types.UID
		labels map[string]string
	}{
		{"a", map[string]string{"app": "web"}},
		{"a", map[string]string{"app": "web", "v": "2"}},
		{"b", map[string]string{"app": "web"}},
		{"c", map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "master"}},
	}
	for _, p := range pods {
		if _, _, _, err := describe(context.Background(), &model.Pod{Namespace: "shop", Name: string(p.uid), UID: p.uid, Labels: model.NewLabels(p.labels)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(w.count.WithLabelValues("no_workload")); got != 2 {
		t.Errorf("regosched_unprotected_pods_total{reason=no_workload} = %v, want 2 (pods a and b, once each)", got)
	}
	if got := len(hook.AllEntries()); got != 2 {
		t.Errorf("%d log lines, want 2", got)
	}
}
