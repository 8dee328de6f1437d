package localcluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeTools lays out the four hashed files of the tool modules under dir.
func writeTools(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestToolsKey(t *testing.T) {
	base := map[string]string{
		"etcd/go.mod":       "module etcd\nrequire go.etcd.io/etcd/server/v3 v3.6.16\n",
		"etcd/go.sum":       "etcd sums\n",
		"kubernetes/go.mod": "module kubernetes\nrequire k8s.io/kubernetes v1.37.2\n",
		"kubernetes/go.sum": "kubernetes sums\n",
	}
	keyOf := func(t *testing.T, files map[string]string) string {
		t.Helper()
		dir := t.TempDir()
		writeTools(t, dir, files)
		key, err := toolsKey(dir, defaultKubernetesDir)
		if err != nil {
			t.Fatalf("toolsKey() error = %v", err)
		}
		return key
	}
	with := func(name, content string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		m[name] = content
		return m
	}
	baseKey := keyOf(t, base)

	t.Run("stable", func(t *testing.T) {
		if got := keyOf(t, base); got != baseKey {
			t.Errorf("same files gave key %s, then %s", baseKey, got)
		}
	})
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"kubernetes version bump", with("kubernetes/go.mod", "module kubernetes\nrequire k8s.io/kubernetes v1.37.3\n")},
		{"etcd go.sum change", with("etcd/go.sum", "etcd sums\nmore\n")},
		{"kubernetes go.sum change", with("kubernetes/go.sum", "")},
		// Moving bytes between files must not collide.
		{"bytes moved between files", with("etcd/go.sum", "etcd sums\nmodule kubernetes\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keyOf(t, tt.files); got == baseKey {
				t.Errorf("key did not change: %s", got)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		dir := t.TempDir()
		files := with("etcd/go.mod", "")
		delete(files, "kubernetes/go.sum")
		writeTools(t, dir, files)
		if _, err := toolsKey(dir, defaultKubernetesDir); err == nil {
			t.Error("toolsKey() succeeded without kubernetes/go.sum")
		}
	})
}

func TestCacheDirFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"explicit", map[string]string{"REGOSCHED_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/c", false},
		{"xdg", map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/regosched", false},
		{"home", map[string]string{"HOME": "/h"}, "/h/.cache/regosched", false},
		{"nothing", map[string]string{}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cacheDirFromEnv(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("cacheDirFromEnv() error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cacheDirFromEnv() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindRepoRoot(t *testing.T) {
	root := t.TempDir()
	writeTools(t, root, map[string]string{
		"go.mod":              "// comment\nmodule github.com/regosched/regosched // the project\n\ngo 1.26.0\n",
		"deploy/tools/go.mod": "module github.com/regosched/regosched/deploy/tools\n",
		"internal/x/keep":     "",
	})
	tests := []struct {
		name  string
		start string
	}{
		{"root itself", root},
		{"plain subfolder", filepath.Join(root, "internal", "x")},
		{"below a nested module", filepath.Join(root, "deploy", "tools")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findRepoRoot(tt.start)
			if err != nil {
				t.Fatalf("findRepoRoot() error = %v", err)
			}
			if diff := cmp.Diff(root, got); diff != "" {
				t.Errorf("findRepoRoot() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("outside", func(t *testing.T) {
		if got, err := findRepoRoot(t.TempDir()); err == nil {
			t.Errorf("findRepoRoot() = %q, want an error", got)
		}
	})
}

func TestBuildSkipsCachedBinaries(t *testing.T) {
	root := t.TempDir()
	writeTools(t, filepath.Join(root, toolsDir), map[string]string{
		"etcd/go.mod": "a", "etcd/go.sum": "b", "kubernetes/go.mod": "c", "kubernetes/go.sum": "d",
	})
	key, err := toolsKey(filepath.Join(root, toolsDir), defaultKubernetesDir)
	if err != nil {
		t.Fatal(err)
	}
	// The default module whatever the environment running the tests says.
	t.Setenv(KubernetesEnv, "")
	cache := t.TempDir()
	want := binariesIn(filepath.Join(cache, "bin-"+key[:16]))
	if err := os.MkdirAll(filepath.Dir(want.Etcd), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(want.kubernetes(), want.Etcd) {
		if err := os.WriteFile(p, []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The tool modules are bogus, so this only passes without running go.
	got, err := Build(t.Context(), BuildOptions{RepoRoot: root, CacheDir: cache})
	if err != nil {
		t.Fatalf("Build() error = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Build() mismatch (-want +got):\n%s", diff)
	}
}

func TestMissingKubernetes(t *testing.T) {
	all := []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"}
	tests := []struct {
		name    string
		present []string
		want    []string
	}{
		{"empty cache", nil, all},
		{"everything cached", all, nil},
		// A folder from before kube-controller-manager joined the harness.
		{"only kube-controller-manager missing", []string{"kube-apiserver", "kube-scheduler", "kubectl"}, []string{"kube-controller-manager"}},
		{"kubectl and kube-scheduler missing", []string{"kube-apiserver", "kube-controller-manager"}, []string{"kube-scheduler", "kubectl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range tt.present {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/true\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got := binariesIn(dir).missingKubernetes()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("missingKubernetes() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKubernetesPackages(t *testing.T) {
	got := kubernetesPackages(binariesIn("/c").missingKubernetes())
	want := []string{
		"k8s.io/kubernetes/cmd/kube-apiserver",
		"k8s.io/kubernetes/cmd/kube-scheduler",
		"k8s.io/kubernetes/cmd/kube-controller-manager",
		"k8s.io/kubernetes/cmd/kubectl",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubernetesPackages() mismatch (-want +got):\n%s", diff)
	}
}
