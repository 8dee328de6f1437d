package deploytest

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// defaultMonitoringLabels is monitoring.labels' default: what
// kube-prometheus-stack installed as release kube-prometheus-stack selects.
var defaultMonitoringLabels = map[string]any{"release": "kube-prometheus-stack"}

// matchLabels says whether labels carry every key and value of selector
// (a label selector's matchLabels; an empty one selects everything).
func matchLabels(selector, labels map[string]any) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// podTemplate returns the pod template labels and the first container of a
// Deployment.
func podTemplate(t *testing.T, objs []Object, key string) (labels map[string]any, c map[string]any) {
	t.Helper()
	d := find(objs, key)
	if d == nil {
		t.Fatalf("no %s", key)
	}
	return dig(d, "spec", "template", "metadata", "labels"), dig(d, "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)
}

// containerPort returns the number of a container's named port, or 0.
func containerPort(c map[string]any, name string) float64 {
	ports, _ := c["ports"].([]any)
	for _, p := range ports {
		p := p.(map[string]any)
		if p["name"] == name {
			n, _ := p["containerPort"].(float64)
			return n
		}
	}
	return 0
}

// scrapeTarget is what a ServiceMonitor or PodMonitor of the chart scrapes,
// resolved through the objects of the render: the Deployment whose pods it
// reaches, on which container port, and its endpoint's settings.
type scrapeTarget struct {
	Deployment string
	Port       float64
	Path       any
	Scheme     any
	Job        any
	Interval   any
	Timeout    any
	Bearer     any // the Secret of the token presented, if any
}

// resolve follows a monitor to the pods it scrapes: a ServiceMonitor to the
// one Service its selector selects in its namespace, the endpoint's port to
// that Service's port and its target port on the pods; a PodMonitor
// straight to the pods. deployments are the keys of the candidates.
func resolve(t *testing.T, objs []Object, monitor Object, deployments []string) scrapeTarget {
	t.Helper()
	spec := dig(monitor, "spec")
	ns := dig(monitor, "metadata")["namespace"]
	selector := dig(spec, "selector", "matchLabels")
	var endpoint map[string]any
	podSelector, portName := selector, ""
	switch monitor["kind"] {
	case "ServiceMonitor":
		endpoint = spec["endpoints"].([]any)[0].(map[string]any)
		var services []Object
		for _, o := range objs {
			if o["kind"] == "Service" && dig(o, "metadata")["namespace"] == ns && matchLabels(selector, dig(o, "metadata", "labels")) {
				services = append(services, o)
			}
		}
		if len(services) != 1 {
			t.Fatalf("%s selects %d Services, want 1", Key(monitor), len(services))
		}
		svc := services[0]
		podSelector = dig(svc, "spec", "selector")
		for _, p := range dig(svc, "spec")["ports"].([]any) {
			p := p.(map[string]any)
			if p["name"] == endpoint["port"] {
				portName, _ = p["targetPort"].(string)
			}
		}
		if portName == "" {
			t.Fatalf("%s: Service %s has no port named %v with a named targetPort", Key(monitor), Key(svc), endpoint["port"])
		}
	case "PodMonitor":
		endpoint = spec["podMetricsEndpoints"].([]any)[0].(map[string]any)
		portName, _ = endpoint["port"].(string)
	default:
		t.Fatalf("%s is no monitor", Key(monitor))
	}
	var got scrapeTarget
	for _, key := range deployments {
		labels, c := podTemplate(t, objs, key)
		if !matchLabels(podSelector, labels) {
			continue
		}
		if got.Deployment != "" {
			t.Fatalf("%s reaches the pods of %s and of %s", Key(monitor), got.Deployment, key)
		}
		got.Deployment, got.Port = key, containerPort(c, portName)
	}
	got.Path, got.Scheme, got.Interval, got.Timeout = endpoint["path"], endpoint["scheme"], endpoint["interval"], endpoint["scrapeTimeout"]
	if r, ok := endpoint["relabelings"].([]any); ok && len(r) > 0 {
		got.Job = r[0].(map[string]any)["replacement"]
	}
	if a, ok := endpoint["authorization"].(map[string]any); ok {
		got.Bearer = dig(a, "credentials")["name"]
	}
	return got
}

// Monitoring: ServiceMonitors (through metrics Services of every replica)
// or PodMonitors reach the extender's health port and the scheduler's
// HTTPS port, under fixed job names, with monitoring.labels; the
// PrometheusRule embeds files/prometheus-rules.yaml; the dashboard
// ConfigMap files/grafana-dashboard.json. Rendered from a copy of the chart,
// with placeholders for the two files while they are not in the chart yet,
// for a cluster that serves the Prometheus operator's CRDs.
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
	const (
		extender  = "Deployment regosched-system/regosched"
		scheduler = "Deployment regosched-system/regosched-scheduler"
	)
	deployments := []string{extender, scheduler}
	extenderTarget := scrapeTarget{Deployment: extender, Port: 8081, Path: "/metrics", Scheme: "http", Job: "regosched", Interval: "30s", Timeout: "10s"}
	schedulerTarget := scrapeTarget{Deployment: scheduler, Port: 10259, Path: "/metrics", Scheme: "https", Job: "regosched-scheduler",
		Interval: "30s", Timeout: "10s", Bearer: "regosched-metrics-reader"}
	reader := []string{
		"ServiceAccount regosched-system/regosched-metrics-reader", "Secret regosched-system/regosched-metrics-reader",
		"ClusterRole regosched-metrics-reader", "ClusterRoleBinding regosched-metrics-reader",
	}
	others := []string{"PrometheusRule regosched-system/regosched", "ConfigMap regosched-system/regosched-dashboard"}
	tests := []struct {
		name   string
		set    []string
		labels map[string]any
		// targets are the monitors wanted, by key, and what each scrapes.
		targets map[string]scrapeTarget
		// more are the other objects wanted beyond the default render's.
		more []string
	}{
		{
			name:   "serviceMonitor",
			set:    []string{"monitoring.serviceMonitor.enabled=true"},
			labels: defaultMonitoringLabels,
			targets: map[string]scrapeTarget{
				"ServiceMonitor regosched-system/regosched":           extenderTarget,
				"ServiceMonitor regosched-system/regosched-scheduler": schedulerTarget,
			},
			more: append([]string{"Service regosched-system/regosched-metrics", "Service regosched-system/regosched-scheduler-metrics"}, reader...),
		},
		{
			name:   "serviceMonitor, extender only, labels and timings of one's own",
			set:    []string{"monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.scheduler.enabled=false", "monitoring.labels.release=prometheus", "monitoring.labels.team=platform", "monitoring.serviceMonitor.interval=15s", "monitoring.serviceMonitor.scrapeTimeout=5s"},
			labels: map[string]any{"release": "prometheus", "team": "platform"},
			targets: map[string]scrapeTarget{
				"ServiceMonitor regosched-system/regosched": {Deployment: extender, Port: 8081, Path: "/metrics", Scheme: "http", Job: "regosched", Interval: "15s", Timeout: "5s"},
			},
			more: []string{"Service regosched-system/regosched-metrics"},
		},
		{
			name:   "podMonitor",
			set:    []string{"monitoring.podMonitor.enabled=true"},
			labels: defaultMonitoringLabels,
			targets: map[string]scrapeTarget{
				"PodMonitor regosched-system/regosched":           extenderTarget,
				"PodMonitor regosched-system/regosched-scheduler": schedulerTarget,
			},
			more: reader,
		},
		{
			// The default label dropped (null deletes a default in Helm).
			name:   "podMonitor, no labels",
			set:    []string{"monitoring.podMonitor.enabled=true", "monitoring.labels.release=null"},
			labels: map[string]any{},
			targets: map[string]scrapeTarget{
				"PodMonitor regosched-system/regosched":           extenderTarget,
				"PodMonitor regosched-system/regosched-scheduler": schedulerTarget,
			},
			more: reader,
		},
		{
			name:   "serviceMonitor, mode plugin",
			set:    []string{"mode=plugin", "monitoring.serviceMonitor.enabled=true"},
			labels: defaultMonitoringLabels,
			targets: map[string]scrapeTarget{
				"ServiceMonitor regosched-system/regosched":           extenderTarget,
				"ServiceMonitor regosched-system/regosched-scheduler": schedulerTarget,
			},
			more: append([]string{"Service regosched-system/regosched-metrics", "Service regosched-system/regosched-scheduler-metrics"}, reader...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := append(slices.Clone(tt.set), "monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true")
			r := Render{Chart: dir, Set: set, APIVersions: CRDAPIVersions}
			objs := chartObjects(t, root, r)
			var baseSet []string
			if slices.Contains(tt.set, "mode=plugin") {
				baseSet = []string{"mode=plugin"}
			}
			base := map[string]bool{}
			for _, o := range chartObjects(t, root, Render{Set: baseSet}) {
				base[Key(o)] = true
			}
			var added []string
			for _, o := range objs {
				if k := Key(o); !base[k] {
					added = append(added, k)
				}
			}
			want := append(slices.Collect(maps.Keys(tt.targets)), tt.more...)
			want = append(want, others...)
			if diff := cmp.Diff(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(added))); diff != "" {
				t.Errorf("objects beyond the default render's (-want +got):\n%s", diff)
			}
			for key, target := range tt.targets {
				m := find(objs, key)
				if m == nil {
					continue
				}
				if diff := cmp.Diff(target, resolve(t, objs, m, deployments)); diff != "" {
					t.Errorf("%s scrapes (-want +got):\n%s", key, diff)
				}
				if got := dig(m, "metadata", "labels"); !matchLabels(tt.labels, got) {
					t.Errorf("%s: labels %v lack %v", key, got, tt.labels)
				}
			}
			rule := find(objs, "PrometheusRule regosched-system/regosched")
			if rule == nil {
				t.Fatal("no PrometheusRule")
			}
			if diff := cmp.Diff(rules, rule["spec"]); diff != "" {
				t.Errorf("PrometheusRule spec (-want %s +got):\n%s", RulesFile, diff)
			}
			if got := dig(rule, "metadata", "labels"); !matchLabels(tt.labels, got) {
				t.Errorf("PrometheusRule labels %v lack %v", got, tt.labels)
			}
			// Only the label wanted, not the default's too.
			for _, o := range objs {
				if k, _ := o["kind"].(string); (k == "ServiceMonitor" || k == "PodMonitor" || k == "PrometheusRule") && len(tt.labels) == 0 {
					if _, ok := dig(o, "metadata", "labels")["release"]; ok {
						t.Errorf("%s: label release set, want none", Key(o))
					}
				}
			}
			cm := find(objs, "ConfigMap regosched-system/regosched-dashboard")
			if cm == nil {
				t.Fatal("no dashboard ConfigMap")
			}
			if got := dig(cm, "metadata", "labels")["grafana_dashboard"]; got != "1" {
				t.Errorf("label grafana_dashboard = %v, want \"1\"", got)
			}
			var wantDashboard, gotDashboard any
			if err := json.Unmarshal(dashboard, &wantDashboard); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(dig(cm, "data")["regosched.json"].(string)), &gotDashboard); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantDashboard, gotDashboard); diff != "" {
				t.Errorf("dashboard (-want +got):\n%s", diff)
			}
			if s := find(objs, "Secret regosched-system/regosched-metrics-reader"); s != nil && s["type"] != "kubernetes.io/service-account-token" {
				t.Errorf("metrics reader Secret type = %v", s["type"])
			}
			if cr := find(objs, "ClusterRole regosched-metrics-reader"); cr != nil {
				want := []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}
				if diff := cmp.Diff(want, cr["rules"]); diff != "" {
					t.Errorf("metrics reader rules (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// kubePrometheusStack is what decides, in kube-prometheus-stack's values,
// which objects of one kind its Prometheus selects: <kind>Selector and
// <kind>SelectorNilUsesHelmValues of prometheus.prometheusSpec, for kind
// serviceMonitor, podMonitor and rule.
type kubePrometheusStack struct {
	// Release is kube-prometheus-stack's Helm release name.
	Release string
	// Selector is <kind>Selector's matchLabels; nil for none (the chart's
	// default is {}, which its template treats as unset).
	Selector map[string]any
	// NilUsesHelmValues is <kind>SelectorNilUsesHelmValues; true by default.
	NilUsesHelmValues bool
}

// selector is the label selector kube-prometheus-stack's Prometheus object
// gets for one kind (its matchLabels: the chart renders no expressions), as
// its template renders it: charts/kube-prometheus-stack/templates/prometheus/
// prometheus.yaml of prometheus-community/helm-charts (commit cf408a2,
// kube-prometheus-stack 88.5.3), serviceMonitorSelector at lines 193-202,
// podMonitorSelector at 209-218, ruleSelector at 277-286, each
//
//	{{- if .Values.prometheus.prometheusSpec.<kind>Selector }}
//	  <kind>Selector: <that selector>
//	{{ else if .Values.prometheus.prometheusSpec.<kind>SelectorNilUsesHelmValues }}
//	  <kind>Selector:
//	    matchLabels:
//	      release: {{ $.Release.Name | quote }}
//	{{ else }}
//	  <kind>Selector: {}
//
// with values.yaml's defaults <kind>SelectorNilUsesHelmValues: true and
// <kind>Selector: {} (lines 4451-4504). The namespace selectors
// (<kind>NamespaceSelector) default to {}: every namespace.
func (k kubePrometheusStack) selector() map[string]any {
	switch {
	case len(k.Selector) > 0:
		return k.Selector
	case k.NilUsesHelmValues:
		return map[string]any{"release": k.Release}
	default:
		return map[string]any{}
	}
}

// A kube-prometheus-stack installed with its defaults as release
// kube-prometheus-stack selects the chart's ServiceMonitors, PodMonitors
// and PrometheusRule with monitoring.labels' default; installed as another
// release it needs monitoring.labels.release set to that name; with its
// selectors opened ({}), anything.
func TestMonitoringSelectedByKubePrometheusStack(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	dir := t.TempDir()
	if _, err := StageChart(root, dir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		stack kubePrometheusStack
		set   []string
		want  bool
	}{
		{"defaults, release kube-prometheus-stack", kubePrometheusStack{Release: "kube-prometheus-stack", NilUsesHelmValues: true}, nil, true},
		{"defaults, release prometheus, our default labels", kubePrometheusStack{Release: "prometheus", NilUsesHelmValues: true}, nil, false},
		{"defaults, release prometheus, monitoring.labels.release=prometheus", kubePrometheusStack{Release: "prometheus", NilUsesHelmValues: true}, []string{"monitoring.labels.release=prometheus"}, true},
		{"NilUsesHelmValues false: every object", kubePrometheusStack{Release: "monitoring"}, []string{"monitoring.labels.release=null"}, true},
		{"a selector of its own", kubePrometheusStack{Release: "kube-prometheus-stack", NilUsesHelmValues: true, Selector: map[string]any{"prometheus": "main"}}, []string{"monitoring.labels.prometheus=main"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []Object
			for _, monitor := range []string{"serviceMonitor", "podMonitor"} {
				set := append([]string{"monitoring." + monitor + ".enabled=true", "monitoring.prometheusRule.enabled=true"}, tt.set...)
				objs = append(objs, chartObjects(t, root, Render{Chart: dir, Set: set, APIVersions: CRDAPIVersions})...)
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kind, _ := o["kind"].(string)
				if kind != "ServiceMonitor" && kind != "PodMonitor" && kind != "PrometheusRule" {
					continue
				}
				kinds[kind]++
				if got := matchLabels(tt.stack.selector(), dig(o, "metadata", "labels")); got != tt.want {
					t.Errorf("%s (labels %v) selected by %v: %v, want %v", Key(o), dig(o, "metadata", "labels"), tt.stack.selector(), got, tt.want)
				}
			}
			if diff := cmp.Diff(map[string]int{"ServiceMonitor": 2, "PodMonitor": 2, "PrometheusRule": 2}, kinds); diff != "" {
				t.Errorf("monitoring objects rendered (-want +got):\n%s", diff)
			}
		})
	}
}

// Objects of custom resources are rendered only for a cluster that serves
// them: otherwise helm template fails with what to install and which
// --api-versions to pass, rather than skipping them (a skipped
// ServiceMonitor is an alert that never fires). helm lint, which cannot be
// told the APIs, passes and lints the objects: in lint mode Helm's fail
// returns nothing.
func TestChartRequiresAPIs(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	dir := t.TempDir()
	if _, err := StageChart(root, dir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		set  []string
		// needs are the API versions wanted; the first is the one named
		// in the message when none is served.
		needs   []string
		install string
		object  string // an object rendered once they are served
	}{
		{"tls.certManager.enabled", []string{"tls.certManager.enabled=true"}, []string{"cert-manager.io/v1/Certificate", "cert-manager.io/v1/Issuer"}, "install cert-manager", "Certificate regosched-system/regosched-tls"},
		{"tls.certManager.enabled with an issuer of one's own", []string{"tls.certManager.enabled=true", "tls.certManager.issuerRef.kind=ClusterIssuer", "tls.certManager.issuerRef.name=ca"}, []string{"cert-manager.io/v1/Certificate"}, "install cert-manager", "Certificate regosched-system/regosched-tls"},
		{"monitoring.serviceMonitor.enabled", []string{"monitoring.serviceMonitor.enabled=true"}, []string{"monitoring.coreos.com/v1/ServiceMonitor"}, "install the Prometheus operator's CRDs", "ServiceMonitor regosched-system/regosched"},
		{"monitoring.podMonitor.enabled", []string{"monitoring.podMonitor.enabled=true"}, []string{"monitoring.coreos.com/v1/PodMonitor"}, "install the Prometheus operator's CRDs", "PodMonitor regosched-system/regosched"},
		{"monitoring.prometheusRule.enabled", []string{"monitoring.prometheusRule.enabled=true"}, []string{"monitoring.coreos.com/v1/PrometheusRule"}, "install the Prometheus operator's CRDs", "PrometheusRule regosched-system/regosched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
			defer cancel()
			value, _, _ := strings.Cut(tt.set[0], "=")
			wants := []string{
				value + ": the cluster does not serve " + strings.Join(tt.needs, ", "),
				tt.install,
				"pass --api-versions " + strings.Join(tt.needs, " --api-versions "),
			}
			r := Render{Chart: dir, Set: tt.set}
			_, err := r.Template(ctx, root)
			for _, want := range wants {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("helm template --set %v without the APIs: error %v, want one containing %q", tt.set, err, want)
				}
			}
			lint(t, root, r)
			// One API short is refused too.
			if len(tt.needs) > 1 {
				_, err := Render{Chart: dir, Set: tt.set, APIVersions: tt.needs[:1]}.Template(ctx, root)
				if want := "does not serve " + strings.Join(tt.needs[1:], ", "); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("helm template with %v only: error %v, want one containing %q", tt.needs[:1], err, want)
				}
			}
			r.APIVersions = tt.needs
			if find(chartObjects(t, root, r), tt.object) == nil {
				t.Errorf("helm template --api-versions %v: no %s", tt.needs, tt.object)
			}
		})
	}
}
