// Package policytest loads regosched's default policy, and variants of it
// with an edited config/data.json, for tests. It is a package of its own,
// not a _test.go file, so that the tests of several packages share one
// copy; only tests import it.
package policytest

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/policy"
)

// DataFile is the default bundle's data document, which Variant edits.
const DataFile = "regosched/config/data.json"

// Default is the embedded default policy, loaded as regosched loads it.
func Default(t testing.TB) *policy.Policy {
	t.Helper()
	return load(t, regosched.DefaultPolicy(), "default")
}

// Variant is the default policy with edit applied to its data.json.
func Variant(t testing.TB, edit func(data string) string) *policy.Policy {
	t.Helper()
	return load(t, VariantFS(t, edit), "variant")
}

// VariantFS is the default bundle's files with edit applied to its
// data.json. An edit that changes nothing fails the test: the default
// data has moved on, and the variant would silently be the default.
func VariantFS(t testing.TB, edit func(data string) string) fstest.MapFS {
	t.Helper()
	mfs := DefaultFS(t)
	raw := string(mfs[DataFile].Data)
	edited := edit(raw)
	if edited == raw {
		t.Fatalf("policytest: the edit left %s unchanged", DataFile)
	}
	mfs[DataFile] = &fstest.MapFile{Data: []byte(edited), Mode: 0o644}
	return mfs
}

// DefaultFS is a copy of the default bundle's files, to add to or edit.
func DefaultFS(t testing.TB) fstest.MapFS {
	t.Helper()
	src := regosched.DefaultPolicy()
	mfs := fstest.MapFS{}
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		mfs[p] = &fstest.MapFile{Data: raw, Mode: 0o644}
		return nil
	})
	if err != nil {
		t.Fatalf("policytest: copying the default bundle: %v", err)
	}
	if _, ok := mfs[DataFile]; !ok {
		t.Fatalf("policytest: the default bundle has no %s", DataFile)
	}
	return mfs
}

// WriteDir writes the bundle files of fsys under dir, as a bundle
// directory for --policy or --shadow-policy, and returns dir.
func WriteDir(t testing.TB, fsys fstest.MapFS, dir string) string {
	t.Helper()
	for name, f := range fsys {
		file := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatalf("policytest: %v", err)
		}
		if err := os.WriteFile(file, f.Data, 0o600); err != nil {
			t.Fatalf("policytest: %v", err)
		}
	}
	return dir
}

// AllApartRule is the rule KeepClusterApart adds.
const AllApartRule = "redis-all-apart"

// KeepClusterApart is an edit of the default data that also keeps every
// two pods of a Redis cluster apart, whatever their roles and shards: a
// policy that denies more than the default, for shadow rollouts.
func KeepClusterApart(data string) string {
	return strings.Replace(data, `"separate": [`,
		`"separate": [{"name": "`+AllApartRule+`", "role": "*", "peer_role": "*", "scope": "cluster"},`, 1)
}

// SetRevision sets the revision in fsys's .manifest, so that a variant
// tells itself apart from the default in logs.
func SetRevision(t testing.TB, fsys fstest.MapFS, revision string) {
	t.Helper()
	const manifest = ".manifest"
	f, ok := fsys[manifest]
	if !ok {
		t.Fatalf("policytest: the bundle has no %s", manifest)
	}
	var m map[string]any
	if err := json.Unmarshal(f.Data, &m); err != nil {
		t.Fatalf("policytest: %s: %v", manifest, err)
	}
	m["revision"] = revision
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("policytest: %s: %v", manifest, err)
	}
	fsys[manifest] = &fstest.MapFile{Data: raw, Mode: f.Mode}
}

func load(t testing.TB, fsys fs.FS, name string) *policy.Policy {
	t.Helper()
	p, err := bundles.Options{}.LoadFS(context.Background(), fsys, name)
	if err != nil {
		t.Fatalf("policytest: loading the %s policy: %v", name, err)
	}
	return p
}
