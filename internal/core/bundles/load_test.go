package bundles

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// form is one way to hand the loader a bundle: read reads it as the loader
// does, load loads it.
type form struct {
	name string
	read func() (*bundle.Bundle, error)
	load func(ctx context.Context, o Options) (*policy.Policy, error)
}

// forms are the bundle directory dir as a directory, as a .tar.gz and as an
// fs.FS.
func forms(t *testing.T, dir string) []form {
	t.Helper()
	tarball := asTarball(t, dir)
	fsys := os.DirFS(dir)
	return []form{
		{
			name: "directory",
			read: func() (*bundle.Bundle, error) { return Options{}.read(dir) },
			load: func(ctx context.Context, o Options) (*policy.Policy, error) { return o.Load(ctx, dir) },
		},
		{
			name: "tar.gz",
			read: func() (*bundle.Bundle, error) { return Options{}.read(tarball) },
			load: func(ctx context.Context, o Options) (*policy.Policy, error) { return o.Load(ctx, tarball) },
		},
		{
			name: "fs.FS",
			read: func() (*bundle.Bundle, error) { return Options{}.readFS(fsys, "test bundle") },
			load: func(ctx context.Context, o Options) (*policy.Policy, error) {
				return o.LoadFS(ctx, fsys, "test bundle")
			},
		},
	}
}

// writeBundle writes fsys to a new directory and returns it.
func writeBundle(t *testing.T, fsys fstest.MapFS) string {
	t.Helper()
	dir := t.TempDir()
	for name, f := range fsys {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), string(f.Data))
	}
	return dir
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

// regoFiles lists the base names of the .rego files under dir, sorted: all
// of them, and those that are not tests.
func regoFiles(t *testing.T, dir string) (all, decisions []string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(p, ".rego") {
			return err
		}
		all = append(all, d.Name())
		if !strings.HasSuffix(p, "_test.rego") {
			decisions = append(decisions, d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	sort.Strings(all)
	sort.Strings(decisions)
	return all, decisions
}

// outcome is what a policy decides for a pending Redis master among the
// pods of its cluster: what the three forms must agree on.
type outcome struct {
	Keys      []string
	Conflicts []model.Conflict
	Penalties []model.Penalty
}

func decide(t *testing.T, p *policy.Policy) outcome {
	t.Helper()
	in := &policy.Input{
		Pod: fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Model(),
		Peers: []*model.Pod{
			fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model(),
			fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("node-2").Model(),
		},
		Nodes: map[string]map[string]string{
			"node-1": {"topology.kubernetes.io/zone": "a"},
			"node-2": {"topology.kubernetes.io/zone": "b"},
		},
	}
	var d outcome
	var err error
	if d.Keys, err = p.PeerKeys(context.Background(), in.Pod); err != nil {
		t.Fatal(err)
	}
	if d.Conflicts, d.Penalties, err = p.Join(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLoadReadsEveryFormAlike: one bundle as a directory, a .tar.gz or an
// fs.FS is read whole (its tests too, which a signature covers) and becomes
// the same policy: same revision, same decisions.
func TestLoadReadsEveryFormAlike(t *testing.T) {
	ctx := context.Background()
	dir := copyPolicy(t, true)
	// Without a manifest the revision is a digest of what was compiled, so
	// equal revisions mean equal modules and data.
	if err := os.Remove(filepath.Join(dir, ".manifest")); err != nil {
		t.Fatal(err)
	}
	all, decisionModules := regoFiles(t, dir)
	if len(all) == len(decisionModules) {
		t.Fatalf("%s has no *_test.rego file: nothing to leave out", dir)
	}
	fms := forms(t, dir)
	ref, err := fms[0].load(ctx, Options{})
	if err != nil {
		t.Fatalf("Load(%s) error = %v", fms[0].name, err)
	}
	want, wantRevision := decide(t, ref), ref.Revision()
	if len(want.Conflicts) == 0 {
		t.Fatal("no conflict for a second master of the cluster: the comparison would prove nothing")
	}
	if !strings.HasPrefix(wantRevision, "sha256:") {
		t.Errorf("Revision() = %q, want a sha256: digest", wantRevision)
	}
	for _, f := range fms {
		t.Run(f.name, func(t *testing.T) {
			b, err := f.read()
			if err != nil {
				t.Fatalf("read error = %v", err)
			}
			if diff := cmp.Diff(all, moduleFiles(b)); diff != "" {
				t.Errorf("modules read (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(decisionModules, moduleFiles(withoutTests(b))); diff != "" {
				t.Errorf("modules for decisions (-want +got):\n%s", diff)
			}
			p, err := f.load(ctx, Options{})
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if p.Revision() != wantRevision {
				t.Errorf("Revision() = %q, want %q as from the %s", p.Revision(), wantRevision, fms[0].name)
			}
			if diff := cmp.Diff(want, decide(t, p)); diff != "" {
				t.Errorf("decisions, against the %s's (-want +got):\n%s", fms[0].name, diff)
			}
		})
	}
}

// TestLoadRunsTestsApart: a bundle's *_test.rego modules never take part in
// decisions or the revision, and run only with RunTests, whatever its form.
func TestLoadRunsTestsApart(t *testing.T) {
	// Compiled into decisions, this module would give every pod the key
	// "from-a-test", which its own test expects to see.
	const addsAKey = `package regosched

peer_keys contains "from-a-test"

test_sees_its_own_rule if "from-a-test" in peer_keys with input as {"pod": {"labels": {}}}
`
	const fails = "package regosched.broken_test\n\ntest_fails if false\n"
	base := compileFS(t, minimal()).Revision()
	web := fixture.MakePod().Namespace("shop").Name("web-0").Label("app", "web").Model()
	tests := []struct {
		name     string
		test     string
		runTests bool
		// wantErr is part of the error; empty: the bundle is accepted.
		wantErr string
	}{
		{name: "no test", runTests: true},
		{name: "a passing test, not run", test: addsAKey},
		{name: "a passing test, run", test: addsAKey, runTests: true},
		{name: "a failing test, not run", test: fails},
		{name: "a failing test, run", test: fails, runTests: true, wantErr: "data.regosched.broken_test.test_fails: failed"},
	}
	for _, tt := range tests {
		fsys := minimal()
		if tt.test != "" {
			fsys["regosched/extra_test.rego"] = &fstest.MapFile{Data: []byte(tt.test)}
		}
		for _, f := range forms(t, writeBundle(t, fsys)) {
			t.Run(tt.name+"/"+f.name, func(t *testing.T) {
				p, err := f.load(context.Background(), Options{RunTests: tt.runTests})
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("Load() error = %v, want one containing %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("Load() error = %v", err)
				}
				if p.Revision() != base {
					t.Errorf("Revision() = %q, want %q as without the test", p.Revision(), base)
				}
				keys, err := p.PeerKeys(context.Background(), web)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{"web"}, keys); diff != "" {
					t.Errorf("PeerKeys() (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestLoadErrors: every error names the bundle, and one that does not exist
// says so to errors.Is.
func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	notGzip := filepath.Join(t.TempDir(), "bundle.tar.gz")
	writeFile(t, notGzip, "not a tarball")
	noClaims := writeBundle(t, fstest.MapFS{"regosched/keys.rego": minimal()["regosched/keys.rego"]})
	missing := filepath.Join(t.TempDir(), "does-not-exist")
	tests := []struct {
		name    string
		load    func() error
		want    string
		wantErr error
	}{
		{"nonexistent path", func() error { _, err := Options{}.Load(ctx, missing); return err }, "reading policy bundle", fs.ErrNotExist},
		{"not a gzip file", func() error { _, err := Options{}.Load(ctx, notGzip); return err }, "reading policy bundle " + notGzip, nil},
		{"refused by Compile", func() error { _, err := Options{}.Load(ctx, noClaims); return err },
			"policy " + noClaims + ": policy defines no rule data.regosched.claims", nil},
		{"refused by Compile, from an fs.FS", func() error {
			_, err := Options{}.LoadFS(ctx, os.DirFS(noClaims), "test bundle")
			return err
		}, "policy test bundle: policy defines no rule data.regosched.claims", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.load()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want errors.Is %v", err, tt.wantErr)
			}
		})
	}
}

// TestLoadLocal: --policy names a bundle, or nothing for the embedded
// default; the data overlay applies to either, and errors name the source.
func TestLoadLocal(t *testing.T) {
	ctx := context.Background()
	dir := writeBundle(t, minimal())
	broken := writeBundle(t, fstest.MapFS{"regosched/keys.rego": {Data: []byte("package regosched\npeer_keys contains k if {")}})
	missing := filepath.Join(t.TempDir(), "missing")
	valkey := fixture.MakePod().Namespace("shop").Name("valkey-0").Labels(map[string]string{
		"app.kubernetes.io/name": "valkey", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "master",
	}).Model()
	tests := []struct {
		name    string
		path    string
		overlay any
		// wantSource is the source LoadLocal reports, in errors too.
		wantSource   string
		wantRevision string
		// wantValkey: whether the valkey pod is in a group.
		wantValkey bool
		// wantErr are parts of the error; wantIs what it must be to errors.Is.
		wantErr []string
		wantIs  error
	}{
		{name: "embedded default", wantSource: EmbeddedName, wantRevision: "default-1"},
		{name: "a path", path: dir, wantSource: dir, wantRevision: compileFS(t, minimal()).Revision()},
		{name: "a data overlay", overlay: map[string]any{"workloads": map[string]any{"valkey": valkeyWorkload(t)}},
			wantSource: EmbeddedName, wantRevision: "default-1", wantValkey: true},
		{name: "a misspelt data overlay", overlay: map[string]any{"workloads": map[string]any{"redis": map[string]any{"cluster_lable": "x"}}},
			wantSource: EmbeddedName, wantErr: []string{"policy " + EmbeddedName + ":", "cluster_lable"}},
		{name: "a missing path", path: missing, wantSource: missing, wantErr: []string{missing}, wantIs: fs.ErrNotExist},
		{name: "a broken bundle", path: broken, wantSource: broken, wantErr: []string{broken, "rego_parse_error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts Options
			if tt.overlay != nil {
				opts.DataFile = writeOverlay(t, t.TempDir(), tt.overlay)
			}
			p, source, err := opts.LoadLocal(ctx, tt.path, regosched.DefaultPolicy())
			if source != tt.wantSource {
				t.Errorf("source = %q, want %q", source, tt.wantSource)
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("LoadLocal() succeeded, want an error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("LoadLocal() error = %q, want it to contain %q", err, w)
					}
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("LoadLocal() error = %v, want errors.Is %v", err, tt.wantIs)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadLocal() error = %v", err)
			}
			if p.Revision() != tt.wantRevision {
				t.Errorf("Revision() = %q, want %q", p.Revision(), tt.wantRevision)
			}
			keys, err := p.PeerKeys(ctx, valkey)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(keys) > 0; got != tt.wantValkey {
				t.Errorf("valkey pod grouped = %v, want %v", got, tt.wantValkey)
			}
		})
	}
}
