package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/regosched/regosched"
)

const defaultBundleDir = "../../rego"

// defaultPolicy compiles the embedded default bundle once for all tests: a
// Policy is immutable and safe for concurrent use.
var defaultPolicy = sync.OnceValues(func() (*Policy, error) {
	b, err := LoadFS(regosched.DefaultPolicy(), "default policy")
	if err != nil {
		return nil, err
	}
	return Compile(context.Background(), b)
})

func mustDefaultPolicy(tb testing.TB) *Policy {
	tb.Helper()
	p, err := defaultPolicy()
	if err != nil {
		tb.Fatalf("compiling the default policy: %v", err)
	}
	return p
}

// moduleFiles returns the base names of a bundle's modules, sorted.
func moduleFiles(b *bundle.Bundle) []string {
	var out []string
	for _, m := range b.Modules {
		out = append(out, path.Base(filepath.ToSlash(m.Path)))
	}
	sort.Strings(out)
	return out
}

// tarGz packs the files under dir into a gzipped tarball, with the paths an
// OPA bundle archive uses ("/regosched/keys.rego").
func tarGz(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: "/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(content)
		return err
	})
	if err != nil {
		t.Fatalf("packing %s: %v", dir, err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLoad(t *testing.T) {
	tarball := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(tarball, tarGz(t, defaultBundleDir), 0o644); err != nil {
		t.Fatal(err)
	}
	// The tarball really holds the test files that loading must leave out.
	if !bytes.Contains(mustGunzip(t, tarball), []byte("filter_test.rego")) {
		t.Fatal("test tarball has no _test.rego file")
	}

	tests := []struct {
		name string
		load func() (*bundle.Bundle, error)
	}{
		{"embedded", func() (*bundle.Bundle, error) { return LoadFS(regosched.DefaultPolicy(), "default") }},
		{"directory", func() (*bundle.Bundle, error) { return Load(defaultBundleDir) }},
		{"tar.gz", func() (*bundle.Bundle, error) { return Load(tarball) }},
	}
	wantModules, testFiles := regoFiles(t, defaultBundleDir)
	if len(testFiles) == 0 {
		t.Fatalf("%s has no *_test.rego file: nothing to leave out", defaultBundleDir)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.load()
			if err != nil {
				t.Fatalf("load error = %v", err)
			}
			if diff := cmp.Diff(wantModules, moduleFiles(b)); diff != "" {
				t.Errorf("modules mismatch (-want +got):\n%s", diff)
			}
			if got, want := b.Manifest.Revision, "default-1"; got != want {
				t.Errorf("manifest revision = %q, want %q", got, want)
			}
			config, _ := b.Data["regosched"].(map[string]any)["config"].(map[string]any)
			if got, want := config["hostname_key"], "kubernetes.io/hostname"; got != want {
				t.Errorf("data regosched.config.hostname_key = %v, want %q", got, want)
			}
			p, err := Compile(context.Background(), b)
			if err != nil {
				t.Fatalf("Compile() error = %v", err)
			}
			if got, want := p.Revision(), "default-1"; got != want {
				t.Errorf("Revision() = %q, want %q", got, want)
			}
		})
	}
}

// regoFiles lists the base names of the .rego files under dir, sorted: the
// modules a loaded bundle must have, and the test files it must not.
func regoFiles(t *testing.T, dir string) (modules, tests []string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case strings.HasSuffix(p, "_test.rego"):
			tests = append(tests, d.Name())
		case strings.HasSuffix(p, ".rego"):
			modules = append(modules, d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	sort.Strings(modules)
	return modules, tests
}

func mustGunzip(t *testing.T, name string) []byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLoadErrors(t *testing.T) {
	notGzip := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(notGzip, []byte("not a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		want    string
		wantErr error
	}{
		{"nonexistent path", "testdata/does-not-exist", "reading policy bundle", fs.ErrNotExist},
		{"not a gzip file", notGzip, "reading policy bundle " + notGzip, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Load(tt.path)
			if err == nil {
				t.Fatalf("Load(%q) = %v, want an error", tt.path, b)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(%q) error = %q, want it to contain %q", tt.path, err, tt.want)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Load(%q) error = %v, want errors.Is %v", tt.path, err, tt.wantErr)
			}
		})
	}
}

// minimal is a small valid policy bundle without a manifest.
func minimal() fstest.MapFS {
	return fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""
`)},
		"regosched/filter.rego": {Data: []byte(`package regosched.filter

conflicts contains {"node": peer.node, "rule": "same-app", "reason": "same app", "peer": peer.uid} if {
	some peer in input.peers
	peer.labels.app == input.pod.labels.app
}
`)},
		"regosched/prioritize.rego": {Data: []byte(`package regosched.prioritize

penalties contains {"topology_key": "kubernetes.io/hostname", "value": peer.node, "rule": "spread", "peer": peer.uid} if {
	some peer in input.peers
}
`)},
		"regosched/config/data.json": {Data: []byte(`{"weight": 1}`)},
	}
}

func compileFS(t *testing.T, fsys fs.FS) *Policy {
	t.Helper()
	b, err := LoadFS(fsys, "test bundle")
	if err != nil {
		t.Fatalf("LoadFS() error = %v", err)
	}
	p, err := Compile(context.Background(), b)
	if err != nil {
		t.Fatalf("Compile() error = %v", err)
	}
	return p
}

func TestRevision(t *testing.T) {
	base := compileFS(t, minimal()).Revision()
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+16 {
		t.Fatalf("Revision() without manifest = %q, want sha256: and 16 hex digits", base)
	}

	with := func(name, content string) fstest.MapFS {
		fsys := minimal()
		fsys[name] = &fstest.MapFile{Data: []byte(content)}
		return fsys
	}
	tests := []struct {
		name     string
		fsys     fstest.MapFS
		wantSame bool
	}{
		{"same content", minimal(), true},
		{"manifest without revision", with(".manifest", `{"roots": ["regosched"]}`), true},
		{"changed module", with("regosched/keys.rego", "package regosched\n\npeer_keys contains \"all\"\n"), false},
		{"added module", with("regosched/extra.rego", "package regosched.extra\n\nx := 1\n"), false},
		{"changed data", with("regosched/config/data.json", `{"weight": 2}`), false},
		{"test file added: not part of the policy", with("regosched/keys_test.rego", "package regosched_test\n\ntest_x if true\n"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compileFS(t, tt.fsys).Revision()
			if !strings.HasPrefix(got, "sha256:") {
				t.Errorf("Revision() = %q, want a sha256: digest", got)
			}
			if same := got == base; same != tt.wantSame {
				t.Errorf("Revision() = %q, base %q: same = %v, want %v", got, base, same, tt.wantSame)
			}
		})
	}

	t.Run("manifest revision wins", func(t *testing.T) {
		got := compileFS(t, with(".manifest", `{"revision": "v42", "roots": ["regosched"]}`)).Revision()
		if got != "v42" {
			t.Errorf("Revision() = %q, want %q", got, "v42")
		}
	})

	// The digest covers content, not where the bundle lies.
	t.Run("same content in two directories", func(t *testing.T) {
		var revs []string
		for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "elsewhere")} {
			for name, f := range minimal() {
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := Load(dir)
			if err != nil {
				t.Fatalf("Load(%q) error = %v", dir, err)
			}
			p, err := Compile(context.Background(), b)
			if err != nil {
				t.Fatalf("Compile() error = %v", err)
			}
			revs = append(revs, p.Revision())
		}
		if diff := cmp.Diff([]string{base, base}, revs); diff != "" {
			t.Errorf("revisions mismatch (-want +got):\n%s", diff)
		}
	})
}
