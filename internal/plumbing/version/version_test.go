package version

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKubernetesMinor(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"v0.37.2", "1.37"},
		{"v0.36.0-alpha.1", "1.36"},
		{"v1.2.3", "unknown"},
		{"", "unknown"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, KubernetesMinor(tc.in)); diff != "" {
				t.Errorf("KubernetesMinor(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestRead(t *testing.T) {
	b, err := os.ReadFile("../../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	release := strings.TrimSpace(string(b))
	deps := []*debug.Module{{Path: "k8s.io/api", Version: "v0.37.2"}, {Path: "k8s.io/client-go", Version: "v0.37.2"}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{
			name: "no build info",
			want: Info{Version: release, Commit: "unknown", Kubernetes: "unknown"},
		},
		{
			name: "a build from a checkout",
			bi: &debug.BuildInfo{Deps: deps, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "606b0c4"}, {Key: "vcs.modified", Value: "true"},
			}},
			want: Info{Version: release, Commit: "606b0c4", Modified: true, Kubernetes: "1.37"},
		},
		{
			name: "no client-go linked",
			bi:   &debug.BuildInfo{},
			want: Info{Version: release, Commit: "unknown", Kubernetes: "unknown"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := read(tc.bi)
			got.GoVersion, got.Platform = "", ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "0.1.0", Commit: "abc", Modified: true, GoVersion: "go1.26.8", Platform: "linux/amd64", Kubernetes: "1.37"}.String()
	want := "regosched 0.1.0 (commit abc-dirty, go1.26.8, linux/amd64, Kubernetes API 1.37)"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
}
