package deploytest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// chartMeta is what the tests read of the chart's Chart.yaml.
type chartMeta struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion"`
	KubeVersion string `json:"kubeVersion"`
}

func readChartMeta(t *testing.T, root string) chartMeta {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ChartPath, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m chartMeta
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	return m
}

// umbrella writes an umbrella chart "platform" into a new folder, with the
// regosched chart of the repository as its dependency (a file:// repository,
// so helm dependency build works offline) and values as its values.yaml, and
// builds its charts/ folder. It returns the folder.
func umbrella(t *testing.T, ctx context.Context, root, values string) string {
	t.Helper()
	dir := t.TempDir()
	meta := readChartMeta(t, root)
	chart := fmt.Sprintf(`apiVersion: v2
name: platform
description: An umbrella chart with regosched as a dependency.
type: application
version: 1.0.0
dependencies:
  - name: %s
    version: %q
    repository: "file://%s"
`, meta.Name, meta.Version, filepath.Join(root, ChartPath))
	// An umbrella of its own templates too, as most are (helm lint warns
	// about a chart without the folder).
	if err := os.Mkdir(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(chart), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Helm(ctx, dir, "dependency", "build", dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The chart works as a dependency of an umbrella chart: Helm injects the
// umbrella's global values into the subchart's, which the strict schema
// must accept (helm/helm#10392), while a misspelt key under regosched: is
// still refused. As a subchart it renders exactly what it renders alone for
// the same release and values: every object named after the umbrella's
// release.
func TestChartAsSubchart(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name   string
		values string
		// standalone are the same values for the chart alone; ignored
		// when wantErr is set.
		standalone Render
		wantErr    string
	}{
		{
			name: "global values and regosched's own",
			values: `global:
  imageRegistry: registry.example.com
  imagePullSecrets: [{name: pull}]
  storageClass: fast
regosched:
  replicas: 2
  logLevel: debug
  networkPolicy:
    health:
      namespaces: [observability]
`,
			standalone: Render{Set: []string{"replicas=2", "logLevel=debug", "networkPolicy.health.namespaces={observability}"}},
		},
		{
			name:       "no values: Helm still injects an empty global",
			values:     "{}\n",
			standalone: Render{},
		},
		{
			name:       "mode plugin",
			values:     "global: {}\nregosched: {mode: plugin}\n",
			standalone: Render{Set: []string{"mode=plugin"}},
		},
		{
			name:    "a misspelt key under regosched is still refused",
			values:  "global: {}\nregosched: {tls: {enable: true}}\n",
			wantErr: "additional properties 'enable' not allowed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
			defer cancel()
			dir := umbrella(t, ctx, root, tt.values)
			out, err := Helm(ctx, dir, "template", "platform", dir, "--namespace", "platform-system", "--kube-version", "v1.37.2")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("helm template of the umbrella: error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lintOut, err := Helm(ctx, dir, "lint", "--strict", dir, "--namespace", "platform-system", "--kube-version", "v1.37.2"); err != nil {
				t.Fatal(err)
			} else if !strings.Contains(string(lintOut), "0 chart(s) failed") {
				t.Fatalf("helm lint of the umbrella:\n%s", lintOut)
			}
			got := map[string]Object{}
			for _, o := range clone(t, out) {
				got[Key(o)] = o
			}
			standalone := tt.standalone
			standalone.Release, standalone.Namespace = "platform", "platform-system"
			want := map[string]Object{}
			for _, o := range chartObjects(t, root, standalone) {
				want[Key(o)] = o
			}
			if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))); diff != "" {
				t.Fatalf("objects of the umbrella (-the chart alone +as a subchart):\n%s", diff)
			}
			for k, w := range want {
				if diff := cmp.Diff(w, got[k]); diff != "" {
					t.Errorf("%s (-the chart alone +as a subchart):\n%s", k, diff)
				}
			}
			// Named after the umbrella's release, in its namespace.
			for k, o := range got {
				md := dig(o, "metadata")
				name, _ := md["name"].(string)
				if !strings.HasPrefix(name, "platform-regosched") {
					t.Errorf("%s: name not prefixed by the release, platform-regosched", k)
				}
				if ns, ok := md["namespace"]; ok && ns != "platform-system" && ns != "kube-system" {
					t.Errorf("%s: namespace %v, want platform-system", k, ns)
				}
			}
			if find(clone(t, out), "Deployment platform-system/platform-regosched") == nil {
				t.Error("no Deployment platform-system/platform-regosched")
			}
		})
	}
}
