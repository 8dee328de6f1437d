package deploytest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Our images, the regosched binary's and regosched-scheduler's: tagged with
// the repository's VERSION wherever they are deployed.
var ownImages = []string{"ghcr.io/regosched/regosched", "ghcr.io/regosched/regosched-scheduler"}

// repoVersion is the repository's VERSION, the one source of the release
// version.
func repoVersion(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		t.Fatal("VERSION is empty")
	}
	return v
}

// images returns the image of every container and init container of the
// Deployments in objs.
func images(objs []Object) []string {
	var out []string
	for _, o := range objs {
		if o["kind"] != "Deployment" {
			continue
		}
		spec := dig(o, "spec", "template", "spec")
		for _, field := range []string{"initContainers", "containers"} {
			cs, _ := spec[field].([]any)
			for _, c := range cs {
				if img, ok := c.(map[string]any)["image"].(string); ok {
					out = append(out, img)
				}
			}
		}
	}
	return out
}

// ours returns the images of ownImages among imgs, sorted and unique.
func ours(imgs []string) []string {
	var out []string
	for _, img := range imgs {
		for _, repo := range ownImages {
			if strings.HasPrefix(img, repo+":") || strings.HasPrefix(img, repo+"@") {
				out = append(out, img)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The release version has one source, VERSION: the chart's version and
// appVersion are it, and the chart and every kustomization of deploy/ run
// our images tagged with it.
func TestVersions(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	version := repoVersion(t, root)
	meta := readChartMeta(t, root)
	t.Run("Chart.yaml", func(t *testing.T) {
		want := map[string]string{"version": version, "appVersion": version}
		got := map[string]string{"version": meta.Version, "appVersion": meta.AppVersion}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Chart.yaml (-VERSION +Chart.yaml):\n%s", diff)
		}
	})
	regosched := "ghcr.io/regosched/regosched:" + version
	scheduler := "ghcr.io/regosched/regosched-scheduler:" + version
	tests := []struct {
		name string
		// dir is a kustomization; render the chart when empty.
		dir    string
		render Render
		want   []string
	}{
		{name: "deploy", dir: "deploy", want: []string{regosched}},
		{name: "deploy/extender", dir: "deploy/extender", want: []string{regosched}},
		{name: "deploy/ha", dir: "deploy/ha", want: []string{regosched}},
		{name: "deploy/tls", dir: "deploy/tls", want: []string{regosched}},
		{name: "deploy/tls/ha", dir: "deploy/tls/ha", want: []string{regosched}},
		{name: "deploy/plugin", dir: "deploy/plugin", want: []string{scheduler}},
		{name: "chart", want: []string{regosched}},
		{name: "chart mode plugin", render: Render{Set: []string{"mode=plugin"}}, want: []string{regosched, scheduler}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []Object
			if tt.dir != "" {
				objs = kustomizeObjects(t, root, tt.dir)
			} else {
				objs = chartObjects(t, root, tt.render)
			}
			if diff := cmp.Diff(slices.Sorted(slices.Values(tt.want)), ours(images(objs))); diff != "" {
				t.Errorf("our images (-want, tagged VERSION %s +got):\n%s", version, diff)
			}
		})
	}
}

// The chart installs on the Kubernetes minors it is tested with, 1.36 and
// later (pre-releases and vendors' builds included), and refuses older
// clusters with Helm's own message.
func TestChartKubeVersion(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	if got := readChartMeta(t, root).KubeVersion; got != ">=1.36.0-0" {
		t.Errorf("Chart.yaml kubeVersion %q, want >=1.36.0-0", got)
	}
	tests := []struct {
		kubeVersion string
		plugin      bool
		wantErr     string
	}{
		{kubeVersion: "v1.36.0"},
		// regosched-scheduler is a 1.37 kube-scheduler: never newer than
		// the API server (docs/compatibility.md).
		{kubeVersion: "v1.37.0", plugin: true},
		{kubeVersion: "v1.38.1-gke.1", plugin: true},
		{kubeVersion: "v1.36.3", plugin: true, wantErr: "must not be newer than the API server (Kubernetes v1.36.3)"},
		{kubeVersion: "v1.36.4-eks-4f4795d"},
		{kubeVersion: "v1.37.2"},
		{kubeVersion: "v1.38.0-rc.1"},
		{kubeVersion: "v1.35.9", wantErr: "incompatible with Kubernetes v1.35.9"},
		{kubeVersion: "v1.36.0-alpha.1"},
	}
	for _, tt := range tests {
		name := tt.kubeVersion
		r := Render{KubeVersion: tt.kubeVersion}
		if tt.plugin {
			name += " plugin"
			r.Set = []string{"mode=plugin"}
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
			defer cancel()
			_, err := r.Template(ctx, root)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("helm template --kube-version %s: %v", tt.kubeVersion, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("helm template --kube-version %s: error %v, want one containing %q", tt.kubeVersion, err, tt.wantErr)
			}
		})
	}
}
