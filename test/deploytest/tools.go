// Package deploytest renders the deployment manifests of the repository,
// the kustomizations of deploy/ and the Helm chart deploy/helm/regosched,
// with Helm and kustomize as pinned Go modules (no binaries to install:
// only the Go module proxy is needed). Its tests prove that the chart and
// kustomize render the same objects; the end-to-end suite uses it to dry-run
// the chart against a real API server.
package deploytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// The pinned tools, as in deploy/validate.sh and /work/shared/NOTES.md.
const (
	HelmModule      = "helm.sh/helm/v4/cmd/helm@v4.3.2"
	KustomizeModule = "sigs.k8s.io/kustomize/kustomize/v5@v5.8.2"
)

// ChartPath is the chart, relative to the repository root.
const ChartPath = "deploy/helm/regosched"

// Files of the chart that another part of the work provides; StageChart
// writes placeholders for those that are missing.
const (
	RulesFile     = "files/prometheus-rules.yaml"
	DashboardFile = "files/grafana-dashboard.json"
)

// Placeholders written by StageChart for missing monitoring files: one rule
// group, one panel.
const (
	PlaceholderRules = `groups:
  - name: regosched-placeholder
    rules:
      - alert: RegoschedPlaceholder
        expr: vector(0) > 1
        for: 5m
        labels: {severity: info}
        annotations:
          summary: "placeholder written by test/deploytest: {{ $labels.job }}"
`
	PlaceholderDashboard = `{"title": "regosched (placeholder)", "uid": "regosched-placeholder", "panels": [{"type": "stat", "title": "up", "targets": [{"expr": "up{job=\"regosched\"}"}]}]}
`
)

// A tool is a command line: HELM or KUSTOMIZE from the environment (e.g.
// "helm", or "go run ..."), else the pinned module, resolved once to the
// executable the Go build cache holds, so that each call costs no "go run".
type tool struct {
	env, module string
	once        sync.Once
	argv        []string
	err         error
}

var (
	helm      = &tool{env: "HELM", module: HelmModule}
	kustomize = &tool{env: "KUSTOMIZE", module: KustomizeModule}
)

func (t *tool) command(ctx context.Context) ([]string, error) {
	t.once.Do(func() {
		if v := strings.Fields(os.Getenv(t.env)); len(v) > 0 {
			t.argv = v
			return
		}
		t.argv = []string{"go", "run", t.module}
		// go run -exec ECHO prints the path of the cached executable
		// instead of running it (Go 1.24 and later cache what go run
		// links). Builds the tool on first use: minutes when cold.
		echo, err := exec.LookPath("echo")
		if err != nil {
			return
		}
		cmd := exec.CommandContext(ctx, "go", "run", "-exec", echo, t.module)
		cmd.Dir = os.TempDir() // outside any module: the version is the pin
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.err = fmt.Errorf("building %s: %w\n%s", t.module, err, stderr.String())
			return
		}
		if f := strings.Fields(string(out)); len(f) == 1 {
			if st, err := os.Stat(f[0]); err == nil && st.Mode().IsRegular() {
				t.argv = f
			}
		}
	})
	return t.argv, t.err
}

func (t *tool) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	argv, err := t.command(ctx)
	if err != nil {
		return nil, err
	}
	argv = append(append([]string(nil), argv...), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w\n%s%s", t.env, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// Helm runs helm with args in dir.
func Helm(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return helm.run(ctx, dir, args...)
}

// Kustomize renders the kustomization in dir (relative to root), as
// deploy/validate.sh does.
func Kustomize(ctx context.Context, root, dir string) ([]byte, error) {
	return kustomize.run(ctx, root, "build", dir)
}

// Render is one helm template of a chart.
type Render struct {
	// Chart is the chart folder; ChartPath under the repository root when
	// empty (see StageChart for a copy with the monitoring files).
	Chart string
	// Release and Namespace default to regosched and regosched-system, the
	// names of deploy/.
	Release, Namespace string
	// KubeVersion is helm's --kube-version: the cluster the chart is
	// rendered for, which the scheduler image follows. v1.37.2 (deploy/'s
	// scheduler image) when empty.
	KubeVersion string
	// Set are --set arguments, SetJSON --set-json ones.
	Set, SetJSON []string
	// APIVersions are helm template's --api-versions: APIs the cluster
	// serves beyond the built-in ones (CRDAPIVersions), without which the
	// chart refuses the values that render their objects. Lint leaves them
	// out: helm lint has no such flag, and needs none (see Lint).
	APIVersions []string
}

// CRDAPIVersions are the custom resources the chart can render
// (cert-manager's with tls.certManager, the Prometheus operator's with
// monitoring), as --api-versions names them.
var CRDAPIVersions = []string{
	"cert-manager.io/v1/Certificate",
	"cert-manager.io/v1/Issuer",
	"monitoring.coreos.com/v1/PodMonitor",
	"monitoring.coreos.com/v1/PrometheusRule",
	"monitoring.coreos.com/v1/ServiceMonitor",
}

func (r Render) args(root string) []string {
	chart := r.Chart
	if chart == "" {
		chart = filepath.Join(root, ChartPath)
	}
	release, ns, kv := r.Release, r.Namespace, r.KubeVersion
	if release == "" {
		release = "regosched"
	}
	if ns == "" {
		ns = "regosched-system"
	}
	if kv == "" {
		kv = "v1.37.2"
	}
	args := []string{release, chart, "--namespace", ns, "--kube-version", kv}
	for _, s := range r.Set {
		args = append(args, "--set", s)
	}
	for _, s := range r.SetJSON {
		args = append(args, "--set-json", s)
	}
	return args
}

// Template runs helm template.
func (r Render) Template(ctx context.Context, root string) ([]byte, error) {
	args := append([]string{"template"}, r.args(root)...)
	for _, a := range r.APIVersions {
		args = append(args, "--api-versions", a)
	}
	return Helm(ctx, root, args...)
}

// Lint runs helm lint --strict with the same chart and values: a warning
// fails it too.
func (r Render) Lint(ctx context.Context, root string) ([]byte, error) {
	// No --api-versions: helm lint has no such flag, and in lint mode the
	// template function fail returns nothing instead of an error
	// (helm.sh/helm/v4 pkg/engine, LintMode), so the chart's refusal of
	// custom resources a cluster does not serve lets lint render them.
	a := r.args(root)
	// lint takes the chart and flags, no release name.
	args := append([]string{"lint", "--strict", a[1]}, a[2:]...)
	return Helm(ctx, root, args...)
}

// StageChart copies the chart into dst and writes a placeholder for each
// monitoring file (RulesFile, DashboardFile) the chart does not have yet;
// it returns the placeholders' paths relative to the chart. The repository
// is not changed.
func StageChart(root, dst string) (placeholders []string, err error) {
	src := filepath.Join(root, ChartPath)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("copying the chart: %w", err)
	}
	for rel, text := range map[string]string{RulesFile: PlaceholderRules, DashboardFile: PlaceholderDashboard} {
		p := filepath.Join(dst, rel)
		if _, err := os.Stat(p); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return nil, err
		}
		placeholders = append(placeholders, rel)
	}
	return placeholders, nil
}

// Object is a rendered manifest, as JSON would decode it.
type Object = map[string]any

// Objects parses a multi-document YAML stream (helm template's or
// kustomize's), skipping empty documents.
func Objects(stream []byte) ([]Object, error) {
	var objs []Object
	for _, doc := range splitDocuments(string(stream)) {
		var o Object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("parsing manifest: %w\n%s", err, doc)
		}
		if len(o) == 0 {
			continue
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// splitDocuments splits at lines that are exactly "---".
func splitDocuments(s string) []string {
	var docs []string
	var cur strings.Builder
	for line := range strings.SplitAfterSeq(s, "\n") {
		if strings.TrimRight(line, "\r\n") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}

// Key identifies an object: kind, namespace/name.
func Key(o Object) string {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	kind, _ := o["kind"].(string)
	if ns == "" {
		return kind + " " + name
	}
	return kind + " " + ns + "/" + name
}

// SchedulerConfig renders the chart with r and returns the
// KubeSchedulerConfiguration of its scheduler ConfigMap
// (<release>-regosched-scheduler-config, key kube-scheduler-config.yaml): the
// text a kube-scheduler deployed by the chart runs, to pass through
// localcluster.SchedulerConfig as deploy/'s file is.
func (r Render) SchedulerConfig(ctx context.Context, root string) ([]byte, error) {
	out, err := r.Template(ctx, root)
	if err != nil {
		return nil, err
	}
	objs, err := Objects(out)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o["kind"] != "ConfigMap" {
			continue
		}
		data, _ := o["data"].(map[string]any)
		if s, ok := data["kube-scheduler-config.yaml"].(string); ok {
			return []byte(s), nil
		}
	}
	return nil, errors.New("helm template: no ConfigMap with kube-scheduler-config.yaml")
}
