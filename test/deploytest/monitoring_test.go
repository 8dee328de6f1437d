package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// Monitoring: the PodMonitors, the PrometheusRule embedding the groups of
// files/prometheus-rules.yaml, the dashboard ConfigMap. Rendered from a copy
// of the chart, with placeholders for the two files while they are not in
// the chart yet.
func TestChartMonitoring(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	dir := t.TempDir()
	placeholders, err := StageChart(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(placeholders) > 0 {
		t.Logf("placeholders for %v (not in the chart yet)", placeholders)
	}
	r := Render{Chart: dir, Set: []string{
		"monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.labels.release=prometheus",
		"monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true",
	}}
	lint(t, root, r)
	objs := chartObjects(t, root, r)

	rulesText, err := os.ReadFile(filepath.Join(dir, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(rulesText, &rules); err != nil {
		t.Fatal(err)
	}
	dashboard, err := os.ReadFile(filepath.Join(dir, DashboardFile))
	if err != nil {
		t.Fatal(err)
	}

	podMonitor := func(job, component, port, scheme string) func(t *testing.T, o Object) {
		return func(t *testing.T, o Object) {
			if got := dig(o, "metadata", "labels")["release"]; got != "prometheus" {
				t.Errorf("label release = %v, want prometheus", got)
			}
			want := map[string]any{"app.kubernetes.io/name": "regosched", "app.kubernetes.io/instance": "regosched", "app.kubernetes.io/component": component}
			if diff := cmp.Diff(want, dig(o, "spec", "selector", "matchLabels")); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
			ep := dig(o, "spec")["podMetricsEndpoints"].([]any)[0].(map[string]any)
			got := map[string]any{"port": ep["port"], "path": ep["path"], "scheme": ep["scheme"], "job": ep["relabelings"].([]any)[0].(map[string]any)["replacement"]}
			if diff := cmp.Diff(map[string]any{"port": port, "path": "/metrics", "scheme": scheme, "job": job}, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		}
	}
	checks := map[string]func(t *testing.T, o Object){
		"PodMonitor regosched-system/regosched":           podMonitor("regosched", "extender", "health", "http"),
		"PodMonitor regosched-system/regosched-scheduler": podMonitor("regosched-scheduler", "scheduler", "https", "https"),
		"PrometheusRule regosched-system/regosched": func(t *testing.T, o Object) {
			if diff := cmp.Diff(rules, o["spec"]); diff != "" {
				t.Errorf("spec (-want %s +got):\n%s", RulesFile, diff)
			}
		},
		"ConfigMap regosched-system/regosched-dashboard": func(t *testing.T, o Object) {
			if got := dig(o, "metadata", "labels")["grafana_dashboard"]; got != "1" {
				t.Errorf("label grafana_dashboard = %v, want \"1\"", got)
			}
			var want, got any
			if err := json.Unmarshal(dashboard, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(dig(o, "data")["regosched.json"].(string)), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("dashboard (-want +got):\n%s", diff)
			}
		},
		// kube-scheduler authorizes /metrics: a reader the PodMonitor's
		// token belongs to.
		"ServiceAccount regosched-system/regosched-metrics-reader": func(*testing.T, Object) {},
		"Secret regosched-system/regosched-metrics-reader": func(t *testing.T, o Object) {
			if o["type"] != "kubernetes.io/service-account-token" {
				t.Errorf("type = %v", o["type"])
			}
		},
		"ClusterRole regosched-metrics-reader": func(t *testing.T, o Object) {
			want := []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}
			if diff := cmp.Diff(want, o["rules"]); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		},
		"ClusterRoleBinding regosched-metrics-reader": func(*testing.T, Object) {},
	}
	base := map[string]bool{}
	for _, o := range chartObjects(t, root, Render{}) {
		base[Key(o)] = true
	}
	for _, o := range objs {
		k := Key(o)
		if base[k] {
			continue
		}
		check, ok := checks[k]
		if !ok {
			t.Errorf("unexpected object %s", k)
			continue
		}
		t.Run(k, func(t *testing.T) { check(t, o) })
		delete(checks, k)
	}
	for k := range checks {
		t.Errorf("no %s", k)
	}
}
