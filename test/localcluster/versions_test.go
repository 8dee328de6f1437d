package localcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// kubeGoMod is a tool module's go.mod requiring k8s.io/kubernetes version.
func kubeGoMod(version string) string {
	return "module tools\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes " + version + "\n\nrequire (\n\tk8s.io/api v0.0.0 // indirect\n)\n"
}

func TestRequiredVersion(t *testing.T) {
	tests := []struct {
		name  string
		gomod string
		want  string
	}{
		{"single line", kubeGoMod("v1.37.2"), "v1.37.2"},
		{"in a block", "module x\n\nrequire (\n\tgithub.com/a/b v1.0.0\n\tk8s.io/kubernetes v1.36.3 // indirect\n)\n", "v1.36.3"},
		{"quoted path", "module x\nrequire \"k8s.io/kubernetes\" v1.35.0\n", "v1.35.0"},
		{"replace and tool lines are not requirements", "module x\nreplace k8s.io/kubernetes => k8s.io/kubernetes v1.2.3\ntool k8s.io/kubernetes/cmd/kubectl\n", ""},
		{"a longer path with the same prefix", "module x\nrequire k8s.io/kubernetes-extra v9.9.9\n", ""},
		{"commented out", "module x\n// require k8s.io/kubernetes v1.0.0\n", ""},
		{"not a go.mod at all", "c", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "go.mod")
			if err := os.WriteFile(path, []byte(tt.gomod), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := requiredVersion(path, "k8s.io/kubernetes")
			if err != nil {
				t.Fatalf("requiredVersion() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("requiredVersion() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMinorOf(t *testing.T) {
	tests := []struct {
		version, want string
	}{
		{"v1.36.3", "1.36"},
		{"v1.37.0-rc.1", "1.37"},
		{"1.36.3", ""},
		{"v1.36", ""},
		{"vx.36.1", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, minorOf(tt.version)); diff != "" {
				t.Errorf("minorOf(%q) mismatch (-want +got):\n%s", tt.version, diff)
			}
		})
	}
}

func TestKubernetesModules(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    []kubernetesModule
		wantErr string
	}{
		{
			name: "default and older minors, newest first",
			files: map[string]string{
				"kubernetes/go.mod":      kubeGoMod("v1.37.2"),
				"kubernetes-1.9/go.mod":  kubeGoMod("v1.9.11"),
				"kubernetes-1.36/go.mod": kubeGoMod("v1.36.3"),
				// Not modules: no go.mod, or not a kubernetes-<minor> name.
				"kubernetes-1.35/README": "",
				"etcd/go.mod":            "module etcd\n",
				"kubernetes.txt":         "",
			},
			want: []kubernetesModule{
				{Dir: "kubernetes", Version: "v1.37.2", Minor: "1.37", Default: true},
				{Dir: "kubernetes-1.36", Version: "v1.36.3", Minor: "1.36"},
				{Dir: "kubernetes-1.9", Version: "v1.9.11", Minor: "1.9"},
			},
		},
		{
			name:  "a default module that names no version",
			files: map[string]string{"kubernetes/go.mod": "c"},
			want:  []kubernetesModule{{Dir: "kubernetes", Default: true}},
		},
		{
			name: "a folder whose go.mod requires another minor",
			files: map[string]string{
				"kubernetes/go.mod":      kubeGoMod("v1.37.2"),
				"kubernetes-1.36/go.mod": kubeGoMod("v1.37.2"),
			},
			wantErr: "kubernetes-1.36 requires k8s.io/kubernetes v1.37.2, not a 1.36 release",
		},
		{
			name:    "no default module",
			files:   map[string]string{"kubernetes-1.36/go.mod": kubeGoMod("v1.36.3")},
			wantErr: "reading tool module kubernetes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTools(t, dir, tt.files)
			got, err := kubernetesModules(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("kubernetesModules() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("kubernetesModules() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("kubernetesModules() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectKubernetes(t *testing.T) {
	mods := []kubernetesModule{
		{Dir: "kubernetes", Version: "v1.37.2", Minor: "1.37", Default: true},
		{Dir: "kubernetes-1.36", Version: "v1.36.3", Minor: "1.36"},
	}
	tests := []struct {
		name    string
		want    string
		wantDir string
		wantErr []string
	}{
		{name: "unset is the default", want: "", wantDir: "kubernetes"},
		{name: "the default's minor", want: "1.37", wantDir: "kubernetes"},
		{name: "an older minor", want: "1.36", wantDir: "kubernetes-1.36"},
		{name: "a minor without a module", want: "1.35", wantErr: []string{
			`REGOSCHED_KUBERNETES="1.35"`,
			"1.37 (deploy/local/tools/kubernetes, v1.37.2, the default)",
			"1.36 (deploy/local/tools/kubernetes-1.36, v1.36.3)",
		}},
		{name: "a patch version is not a minor", want: "1.36.3", wantErr: []string{`"1.36.3"`}},
		{name: "a folder name is not a minor", want: "kubernetes-1.36", wantErr: []string{"no tool module"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selectKubernetes(mods, tt.want)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("selectKubernetes(%q) = %+v, want an error", tt.want, got)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("selectKubernetes(%q) error = %v, want it to contain %q", tt.want, err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("selectKubernetes(%q) error = %v", tt.want, err)
			}
			if diff := cmp.Diff(tt.wantDir, got.Dir); diff != "" {
				t.Errorf("selectKubernetes(%q) mismatch (-want +got):\n%s", tt.want, diff)
			}
		})
	}
}

// TestBuildPicksTheModule checks that each Kubernetes minor has a cache
// folder of its own and that a cached one is used whatever the others hold,
// without running go (the tool modules are fakes).
func TestBuildPicksTheModule(t *testing.T) {
	root := t.TempDir()
	tools := filepath.Join(root, toolsDir)
	writeTools(t, tools, map[string]string{
		"etcd/go.mod": "a", "etcd/go.sum": "b",
		"kubernetes/go.mod": kubeGoMod("v1.37.2"), "kubernetes/go.sum": "d",
		"kubernetes-1.36/go.mod": kubeGoMod("v1.36.3"), "kubernetes-1.36/go.sum": "e",
	})
	cache := t.TempDir()
	cached := func(t *testing.T, kubeDir, version string) Binaries {
		t.Helper()
		key, err := toolsKey(tools, kubeDir)
		if err != nil {
			t.Fatal(err)
		}
		b := binariesIn(filepath.Join(cache, "bin-"+key[:16]))
		b.Kubernetes = version
		if err := os.MkdirAll(filepath.Dir(b.Etcd), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range append(b.kubernetes(), b.Etcd) {
			if err := os.WriteFile(p, []byte("#!/bin/true\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	v137 := cached(t, "kubernetes", "v1.37.2")
	v136 := cached(t, "kubernetes-1.36", "v1.36.3")
	if v137.Etcd == v136.Etcd {
		t.Fatalf("both minors share the cache folder %s", filepath.Dir(v137.Etcd))
	}

	tests := []struct {
		name string
		env  string
		opt  string
		want Binaries
	}{
		{name: "unset", want: v137},
		{name: "env 1.37", env: "1.37", want: v137},
		{name: "env 1.36", env: "1.36", want: v136},
		{name: "the option wins over the env", env: "1.37", opt: "1.36", want: v136},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(KubernetesEnv, tt.env)
			got, err := Build(t.Context(), BuildOptions{RepoRoot: root, CacheDir: cache, Kubernetes: tt.opt})
			if err != nil {
				t.Fatalf("Build() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Build() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("unknown minor", func(t *testing.T) {
		t.Setenv(KubernetesEnv, "1.30")
		_, err := Build(t.Context(), BuildOptions{RepoRoot: root, CacheDir: cache})
		if err == nil || !strings.Contains(err.Error(), "1.36 (deploy/local/tools/kubernetes-1.36") {
			t.Errorf("Build() error = %v, want one listing 1.36", err)
		}
	})
}

// TestToolsKeyOfTheDefaultModule pins the key's recipe for the default
// module: it names the cache folder of binaries built before other minors
// existed, which a change would orphan (a rebuild of minutes).
func TestToolsKeyOfTheDefaultModule(t *testing.T) {
	files := map[string]string{
		"etcd/go.mod": "a", "etcd/go.sum": "bb", "kubernetes/go.mod": "ccc", "kubernetes/go.sum": "dddd",
		"kubernetes-1.36/go.mod": "ccc", "kubernetes-1.36/go.sum": "dddd",
	}
	dir := t.TempDir()
	writeTools(t, dir, files)
	// The recipe as it was when only one Kubernetes module existed.
	h := sha256.New()
	fmt.Fprintf(h, "%s/%s\n", runtime.GOOS, runtime.GOARCH)
	for _, name := range []string{"etcd/go.mod", "etcd/go.sum", "kubernetes/go.mod", "kubernetes/go.sum"} {
		fmt.Fprintf(h, "%s %d\n%s", name, len(files[name]), files[name])
	}
	want := hex.EncodeToString(h.Sum(nil))

	got, err := toolsKey(dir, defaultKubernetesDir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("toolsKey() of the default module mismatch (-want +got):\n%s", diff)
	}
	older, err := toolsKey(dir, "kubernetes-1.36")
	if err != nil {
		t.Fatal(err)
	}
	// Same bytes in another folder: the file names are hashed too.
	if older == got {
		t.Errorf("kubernetes and kubernetes-1.36 with the same files share key %s", got)
	}
}

// TestKwokVersion checks the pin is a release BuildKwok can install.
func TestKwokVersion(t *testing.T) {
	if minorOf(KwokVersion) == "" {
		t.Errorf("KwokVersion %q is not a vMAJOR.MINOR.PATCH release", KwokVersion)
	}
}
