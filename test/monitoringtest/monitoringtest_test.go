package monitoringtest

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"
)

// Selectors the rules file promises (see its header): every regosched
// metric is selected by the first, the scheduler's pending pods by the
// second, its attempts by the profile.
const (
	extenderJob  = `job=~".*regosched"`
	schedulerJob = `job=~".*regosched-scheduler"`
	profile      = `profile="regosched"`
)

// targetLabels are labels a scrape attaches (prometheus-operator's, and
// job and instance), which no /metrics page carries itself.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "endpoint", "service"}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found from the package directory: %v", err)
	}
	return root
}

func TestUses(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want []Use
	}{
		{"bare metric", "up", []Use{{Metric: "up"}}},
		{"matchers", `up{job=~".*regosched", instance!="a"} == 1`, []Use{{Metric: "up", Labels: []string{"job", "instance"}}}},
		{"function and range", `rate(regosched_requests_total{outcome="ok"}[5m])`,
			[]Use{{Metric: "regosched_requests_total", Labels: []string{"outcome"}}}},
		{"aggregation with grouping before and after", `sum by (job, verb) (rate(a_total[5m])) / sum(rate(b_total[5m])) without (le)`,
			[]Use{{Metric: "a_total"}, {Metric: "b_total"}}},
		{"histogram_quantile", `histogram_quantile(0.99, sum by (job, verb, le) (rate(x_bucket{job=~".*r"}[5m]))) > 2`,
			[]Use{{Metric: "x_bucket", Labels: []string{"job"}}}},
		{"set operators, on () and offset", "count(a == 1) > 0\nunless on ()\ncount(b offset 30m) > 0 or on(job) c",
			[]Use{{Metric: "a"}, {Metric: "b"}, {Metric: "c"}}},
		{"ignoring and group_left with and without lists", `a * ignoring(x) group_left(y) b + c * on(z) group_left d`,
			[]Use{{Metric: "a"}, {Metric: "b"}, {Metric: "c"}, {Metric: "d"}}},
		{"strings that look like metrics", `label_replace(v{a="regosched_x"}, "dst", "$1", "src", "(up|b)")`,
			[]Use{{Metric: "v", Labels: []string{"a"}}}},
		{"escaped quote in a string", `v{a="x\"y{z}"}`, []Use{{Metric: "v", Labels: []string{"a"}}}},
		{"Grafana variables", `sum(rate(v{job=~"$job"}[$__rate_interval])) by (x) / $scale * ${factor}`,
			[]Use{{Metric: "v", Labels: []string{"job"}}}},
		{"__name__ matcher", `{__name__="v", job="j"}`, []Use{{Metric: "v", Labels: []string{"job"}}}},
		{"keywords and numbers", `a > bool 1e3 and b < Inf or c != NaN + 0x1f - .5`,
			[]Use{{Metric: "a"}, {Metric: "b"}, {Metric: "c"}}},
		{"subquery", `max_over_time(sum(v)[15m:1m])`, []Use{{Metric: "v"}}},
		{"at modifier", `v @ start()`, []Use{{Metric: "v"}}},
		{"colons in recorded names", `job:requests:rate5m`, []Use{{Metric: "job:requests:rate5m"}}},
		{"comment", "v # w\n+ x", []Use{{Metric: "v"}, {Metric: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Uses(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Uses(%q) (-want +got):\n%s", tt.expr, diff)
			}
		})
	}

	errs := []struct {
		name string
		expr string
	}{
		{"unterminated string", `v{a="x}`},
		{"unclosed range", `rate(v[5m)`},
		{"selector without a name", `{job="x"}`},
		{"bad operator", `v{a=="x"}`},
		{"value not a string", `v{a=x}`},
	}
	for _, tt := range errs {
		t.Run("error/"+tt.name, func(t *testing.T) {
			if got, err := Uses(tt.expr); err == nil {
				t.Errorf("Uses(%q) = %v, want an error", tt.expr, got)
			}
		})
	}
}

func TestParseExposition(t *testing.T) {
	body := []byte(`# HELP regosched_binds_total Bind verb outcomes.
# TYPE regosched_binds_total counter
regosched_binds_total{outcome="bound"} 3
# HELP regosched_request_duration_seconds Time to answer.
# TYPE regosched_request_duration_seconds histogram
regosched_request_duration_seconds_bucket{outcome="ok",verb="filter",le="0.0001"} 0
regosched_request_duration_seconds_bucket{outcome="ok",verb="filter",le="+Inf"} 4
regosched_request_duration_seconds_sum{outcome="ok",verb="filter"} 0.01
regosched_request_duration_seconds_count{outcome="ok",verb="filter"} 4
# HELP regosched_violations Pairs, with a "quoted} brace".
# TYPE regosched_violations gauge
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 1e-05
go_gc_duration_seconds_sum 0.1
go_gc_duration_seconds_count 5
up 1 1700000000000
`)
	e, err := ParseExposition(body)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name             string
		declared, sample bool
		family, typ      string
		labels           []string
	}{
		{"regosched_binds_total", true, true, "regosched_binds_total", "counter", []string{"outcome"}},
		{"regosched_request_duration_seconds_bucket", true, true, "regosched_request_duration_seconds", "histogram", []string{"le", "outcome", "verb"}},
		{"regosched_request_duration_seconds_count", true, true, "regosched_request_duration_seconds", "histogram", []string{"outcome", "verb"}},
		{"regosched_request_duration_seconds", true, false, "regosched_request_duration_seconds", "histogram", nil},
		{"regosched_violations", true, false, "regosched_violations", "gauge", nil},
		{"go_gc_duration_seconds_sum", true, true, "go_gc_duration_seconds", "summary", nil},
		{"go_gc_duration_seconds_bucket", false, false, "", "", nil},
		{"up", false, true, "", "", nil},
		{"regosched_missing", false, false, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			declared, sampled := e.Has(tt.name)
			if declared != tt.declared || sampled != tt.sample {
				t.Errorf("Has = %v, %v; want %v, %v", declared, sampled, tt.declared, tt.sample)
			}
			fam, typ, _ := e.Family(tt.name)
			if fam != tt.family || typ != tt.typ {
				t.Errorf("Family = %q, %q; want %q, %q", fam, typ, tt.family, tt.typ)
			}
			var labels []string
			for l := range e.Samples[tt.name] {
				labels = append(labels, l)
			}
			sort.Strings(labels)
			if diff := cmp.Diff(tt.labels, labels, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRules checks the shape of every alert: a severity, a summary, a
// description that says what to do, and the documented selectors on every
// metric, so that retargeting them (the header) reaches every expression.
func TestRules(t *testing.T) {
	root := repoRoot(t)
	groups, err := ReadRules(root)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, RulesPath))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			t.Run(r.Alert, func(t *testing.T) {
				if r.Alert == "" {
					t.Fatalf("group %s: a rule that is not an alert (record %q)", g.Name, r.Record)
				}
				if seen[r.Alert] {
					t.Errorf("alert %s defined twice", r.Alert)
				}
				seen[r.Alert] = true
				if !strings.HasPrefix(r.Alert, "Regosched") {
					t.Errorf("alert name %s does not start with Regosched", r.Alert)
				}
				if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
					t.Errorf("severity %q, want critical, warning or info", s)
				}
				if r.Annotations["summary"] == "" {
					t.Error("no summary annotation")
				}
				if d := r.Annotations["description"]; !strings.Contains(d, "What to do:") {
					t.Errorf("description does not say what to do (no \"What to do:\"): %q", d)
				}
				uses, err := Uses(r.Expr)
				if err != nil {
					t.Fatal(err)
				}
				if len(uses) == 0 {
					t.Fatal("the expression selects no metric")
				}
				for _, u := range uses {
					var want string
					switch {
					case u.Metric == "up" || strings.HasPrefix(u.Metric, "regosched_"):
						want = "job"
					case u.Metric == "scheduler_pending_pods":
						want = "job"
					case u.Metric == "scheduler_schedule_attempts_total":
						want = "profile"
					default:
						t.Errorf("metric %s: neither regosched's nor the scheduler's", u.Metric)
						continue
					}
					if !slices.Contains(u.Labels, want) {
						t.Errorf("%s selected without a %s matcher", u.Metric, want)
					}
				}
			})
		}
	}
	// The alerts issue 25 asks for, and those this file adds.
	for _, name := range []string{
		"RegoschedDown", "RegoschedNoReadyReplica", "RegoschedPolicyReloadFailed", "RegoschedBindErrors",
		"RegoschedRequestsNearTimeout", "RegoschedProfilePodsPending", "RegoschedAPIServerUnreachable",
		"RegoschedPlacementViolations", "RegoschedUnprotectedPods", "RegoschedRedisRoleErrors",
		"RegoschedSchedulingErrors", "RegoschedVerbErrors", "RegoschedAuditFailing", "RegoschedRepairsFailing",
		"RegoschedRepairStateWriteFailing",
	} {
		if !seen[name] {
			t.Errorf("alert %s missing", name)
		}
	}
	// Only the documented selectors, written as documented, so that one
	// search-and-replace retargets every expression.
	jobRE := regexp.MustCompile(`\bjob\s*(=~|=|!=|!~)\s*"[^"]*"`)
	profileRE := regexp.MustCompile(`\bprofile\s*(=~|=|!=|!~)\s*"[^"]*"`)
	for _, g := range groups {
		for _, r := range g.Rules {
			for _, m := range jobRE.FindAllString(r.Expr, -1) {
				if m != extenderJob && m != schedulerJob {
					t.Errorf("%s: job matcher %s: the header documents only %s and %s", r.Alert, m, extenderJob, schedulerJob)
				}
			}
			for _, m := range profileRE.FindAllString(r.Expr, -1) {
				if m != profile {
					t.Errorf("%s: profile matcher %s: the header documents only %s", r.Alert, m, profile)
				}
			}
		}
	}
	for _, sel := range []string{extenderJob, schedulerJob, profile} {
		if !strings.Contains(string(raw), "#   "+sel) {
			t.Errorf("selector %s not documented in the header", sel)
		}
	}
}

// TestAlertsTested checks that the promtool tests see every alert fire and
// stay quiet at least once each, and test no alert that does not exist.
func TestAlertsTested(t *testing.T) {
	root := repoRoot(t)
	groups, err := ReadRules(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, RulesTestPath))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			Name  string `json:"name"`
			Cases []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Base(RulesPath)}; !slices.Equal(doc.RuleFiles, want) {
		t.Errorf("rule_files = %v, want %v", doc.RuleFiles, want)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tg := range doc.Tests {
		for _, c := range tg.Cases {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			} else {
				quiet[c.Alertname]++
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			t.Run(r.Alert, func(t *testing.T) {
				if fires[r.Alert] == 0 {
					t.Error("no test case in which it fires")
				}
				if quiet[r.Alert] == 0 {
					t.Error("no test case in which it stays quiet")
				}
			})
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("test cases for %s, which the rules do not define", name)
		}
	}
	for name := range quiet {
		if !alerts[name] {
			t.Errorf("test cases for %s, which the rules do not define", name)
		}
	}
}

// TestDashboard checks the dashboard's structure: a schema Grafana 9+
// reads, the data source as a variable everywhere, panels on the grid
// without overlaps, and a panel for each subject issue 25 lists.
func TestDashboard(t *testing.T) {
	root := repoRoot(t)
	d, err := ReadDashboard(root)
	if err != nil {
		t.Fatal(err)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want >= 36", d.SchemaVersion)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both needed for provisioning", d.UID, d.Title)
	}
	const ds = "${datasource}"
	vars := map[string]Variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != ds) {
			t.Errorf("variable %s: datasource %+v, want uid %s", v.Name, v.Datasource, ds)
		}
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || v.QueryText() != "prometheus" {
		t.Errorf("no datasource variable of type datasource for prometheus: %+v", v)
	}
	for _, name := range []string{"job", "instance", "scheduler_job", "profile"} {
		if _, ok := vars[name]; !ok {
			t.Errorf("variable %s missing", name)
		}
	}

	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range d.AllPanels() {
		t.Run(fmt.Sprintf("%d %s", p.ID, p.Title), func(t *testing.T) {
			if p.Title == "" {
				t.Error("no title")
			}
			if prev, ok := ids[p.ID]; ok || p.ID == 0 {
				t.Errorf("id %d not unique (also %q)", p.ID, prev)
			}
			ids[p.ID] = p.Title
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("gridPos %+v off the 24-column grid", g)
			}
			for x := g.X; x < g.X+g.W; x++ {
				for y := g.Y; y < g.Y+g.H; y++ {
					if other, ok := taken[cell{x, y}]; ok {
						t.Fatalf("gridPos %+v overlaps panel %q", g, other)
					}
					taken[cell{x, y}] = p.Title
				}
			}
			if p.Type == "row" {
				return
			}
			if p.Datasource == nil || p.Datasource.UID != ds {
				t.Errorf("datasource %+v, want uid %s", p.Datasource, ds)
			}
			if len(p.Targets) == 0 {
				t.Error("no targets")
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("target %q: empty expression or refId, or refId repeated", tg.RefID)
				}
				refs[tg.RefID] = true
				if tg.Datasource != nil && tg.Datasource.UID != ds {
					t.Errorf("target %s: datasource %+v, want uid %s", tg.RefID, tg.Datasource, ds)
				}
				uses, err := Uses(tg.Expr)
				if err != nil {
					t.Fatalf("target %s: %v", tg.RefID, err)
				}
				for _, u := range uses {
					job := slices.Contains(u.Labels, "job")
					if !job {
						t.Errorf("target %s: %s selected without a job matcher", tg.RefID, u.Metric)
					}
				}
			}
		})
	}

	raw, err := os.ReadFile(filepath.Join(root, DashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\bjob\s*(=~|=|!=|!~)\s*\\"[^"\\]*\\"`).FindAllString(string(raw), -1) {
		if m != `job=~\"$job\"` && m != `job=~\"$scheduler_job\"` {
			t.Errorf("job matcher %s: want job=~\"$job\" (regosched) or job=~\"$scheduler_job\"", m)
		}
	}

	qs, err := DashboardQueries(root)
	if err != nil {
		t.Fatal(err)
	}
	names, err := MetricNames(qs)
	if err != nil {
		t.Fatal(err)
	}
	// What issue 25 asks the dashboard to show.
	for _, m := range []string{
		"regosched_requests_total", "regosched_request_duration_seconds_bucket", "regosched_filter_denials_total",
		"regosched_binds_total", "scheduler_pending_pods", "regosched_policy_info", "regosched_policy_reloads_total",
		"regosched_violations", "regosched_unprotected_pods_total", "regosched_api_server_reachable",
		"regosched_inflight_wait_seconds_bucket", "regosched_repairs_total",
	} {
		if len(names[m]) == 0 {
			t.Errorf("no panel queries %s", m)
		}
	}
}

// declaration is a metric as the Go code registers it.
type declaration struct {
	kind   string // Counter, Gauge, Histogram, Summary
	labels []string
	file   string
	opts   string // the text of its options
}

// declarationRE finds prometheus.NewX[Vec|Func](prometheus.XOpts{...}[,
// []string{...}]) in source; the options' closing brace is the first one
// at the start of a line (Help strings are single-line).
var (
	declarationRE = regexp.MustCompile(`(?s)prometheus\.New(Counter|Gauge|Histogram|Summary)(Vec|Func)?\(\s*prometheus\.(?:Counter|Gauge|Histogram|Summary)Opts\{(.*?)\n\s*\}(, \[\]string\{([^}]*)\})?`)
	nameRE        = regexp.MustCompile(`\bName:\s*"([^"]+)"`)
)

// declaredMetrics scans the non-test Go files under root's internal/ and
// cmd/ for the regosched_ metrics they register.
func declaredMetrics(t *testing.T, root string) map[string]declaration {
	t.Helper()
	out := map[string]declaration{}
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range declarationRE.FindAllStringSubmatch(string(src), -1) {
				n := nameRE.FindStringSubmatch(m[3])
				if n == nil || !strings.HasPrefix(n[1], "regosched_") {
					continue
				}
				var labels []string
				for _, l := range strings.Split(m[5], ",") {
					if l = strings.Trim(strings.TrimSpace(l), `"`); l != "" {
						labels = append(labels, l)
					}
				}
				rel, _ := filepath.Rel(root, path)
				if prev, ok := out[n[1]]; ok {
					t.Errorf("%s declared in %s and %s", n[1], prev.file, rel)
				}
				out[n[1]] = declaration{kind: m[1], labels: labels, file: rel, opts: m[3]}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestMetricsDeclared checks every regosched_ metric the rules and the
// dashboard query against the code that registers it: its name (a
// histogram's through _bucket, _sum, _count) and the labels its matchers
// test. The e2e test TestMonitoringMetricsExported checks the same names
// on a running regosched.
func TestMetricsDeclared(t *testing.T) {
	root := repoRoot(t)
	decls := declaredMetrics(t, root)
	// A sanity check of the scan itself, from metrics README.md lists.
	for name, want := range map[string]declaration{
		"regosched_requests_total":           {kind: "Counter", labels: []string{"verb", "outcome"}},
		"regosched_request_duration_seconds": {kind: "Histogram", labels: []string{"verb", "outcome"}},
		"regosched_api_server_reachable":     {kind: "Gauge"},
		"regosched_pending_pods":             {kind: "Gauge"},
	} {
		got := decls[name]
		if got.kind != want.kind || !slices.Equal(got.labels, want.labels) {
			t.Errorf("scan of the Go code: %s = %+v, want %+v", name, got, want)
		}
	}

	rq, err := RuleQueries(root)
	if err != nil {
		t.Fatal(err)
	}
	dq, err := DashboardQueries(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(rq, dq...) {
		uses, err := Uses(q.Expr)
		if err != nil {
			t.Fatalf("%s: %v", q.Source, err)
		}
		for _, u := range uses {
			if !strings.HasPrefix(u.Metric, "regosched_") {
				continue
			}
			name, suffix := u.Metric, ""
			d, ok := decls[name]
			if !ok {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					if base, found := strings.CutSuffix(u.Metric, s); found && decls[base].kind == "Histogram" {
						name, suffix, d, ok = base, s, decls[base], true
					}
				}
			}
			if !ok {
				t.Errorf("%s: %s is not registered by the Go code", q.Source, u.Metric)
				continue
			}
			if d.kind == "Histogram" && suffix == "" {
				t.Errorf("%s: histogram %s used without _bucket, _sum or _count", q.Source, name)
			}
			for _, l := range u.Labels {
				if slices.Contains(d.labels, l) || slices.Contains(targetLabels, l) || (l == "le" && suffix == "_bucket") {
					continue
				}
				t.Errorf("%s: %s has no label %s (it has %v)", q.Source, u.Metric, l, d.labels)
			}
		}
	}
}

// TestLatencyAlertBelowTopBucket checks that the latency alert's threshold
// lies below the request histogram's largest finite bucket: above it,
// histogram_quantile never reports a value and the alert could never fire.
func TestLatencyAlertBelowTopBucket(t *testing.T) {
	root := repoRoot(t)
	d, ok := declaredMetrics(t, root)["regosched_request_duration_seconds"]
	if !ok {
		t.Fatal("regosched_request_duration_seconds not declared")
	}
	m := regexp.MustCompile(`Buckets:\s*prometheus\.ExponentialBuckets\(([0-9.e-]+),\s*([0-9.]+),\s*([0-9]+)\)`).FindStringSubmatch(d.opts)
	if m == nil {
		t.Fatalf("%s: buckets not given as prometheus.ExponentialBuckets(start, factor, count); update this test:\n%s", d.file, d.opts)
	}
	start, _ := strconv.ParseFloat(m[1], 64)
	factor, _ := strconv.ParseFloat(m[2], 64)
	count, _ := strconv.Atoi(m[3])
	top := start * math.Pow(factor, float64(count-1))

	groups, err := ReadRules(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert != "RegoschedRequestsNearTimeout" {
				continue
			}
			th := regexp.MustCompile(`>\s*([0-9.]+)\s*$`).FindStringSubmatch(strings.TrimSpace(r.Expr))
			if th == nil {
				t.Fatalf("no trailing > threshold in %q", r.Expr)
			}
			threshold, _ := strconv.ParseFloat(th[1], 64)
			if threshold >= top {
				t.Errorf("threshold %g s is not below the top finite bucket %g s: the alert can never fire", threshold, top)
			}
			t.Logf("threshold %g s, top finite bucket %.3f s, scheduler httpTimeout 5 s", threshold, top)
			return
		}
	}
	t.Fatal("alert RegoschedRequestsNearTimeout not found")
}

// TestPromtool runs the pinned promtool on the rules: `check rules` parses
// and lints them with Prometheus's own parser, `test rules` runs
// prometheus-rules_test.yaml. The first build of promtool takes minutes
// (go run caches it afterwards).
func TestPromtool(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping promtool, which go run builds from " + PromtoolModule + " (minutes the first time)")
	}
	root := repoRoot(t)
	groups, err := ReadRules(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range groups {
		n += len(g.Rules)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"check rules", []string{"check", "rules", RulesPath}, fmt.Sprintf("SUCCESS: %d rules found", n)},
		{"test rules", []string{"test", "rules", RulesTestPath}, "SUCCESS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Stop short of the test binary's deadline, which would
			// panic without saying why.
			ctx := t.Context()
			if deadline, ok := t.Deadline(); ok {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline.Add(-15*time.Second))
				defer cancel()
			}
			cmd := exec.CommandContext(ctx, "go", append([]string{"run", PromtoolModule}, tt.args...)...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("promtool %s: the test's deadline passed (the first build of promtool takes minutes; use -timeout 30m):\n%s", strings.Join(tt.args, " "), out)
			}
			if err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("promtool %s: output lacks %q:\n%s", strings.Join(tt.args, " "), tt.want, out)
			}
			t.Logf("promtool %s:\n%s", strings.Join(tt.args, " "), out)
		})
	}
}
