package internal

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/regosched/regosched/"

// mayImport says which groups of internal/ a group's product code may
// import (the package comments of the groups say why).
var mayImport = map[string][]string{
	"core":     {"core", "plumbing"},
	"plumbing": {"plumbing"},
	"redis":    {"core", "plumbing", "redis"},
	"ops":      {"core", "plumbing", "redis", "ops"},
	"frontend": {"core", "plumbing", "redis", "ops", "frontend"},
}

// TestLayout holds the product code of internal/ and cmd/ (tests aside) to
// the groups' import rules, and keeps the test harness out of it.
func TestLayout(t *testing.T) {
	for _, root := range []string{".", "../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			// Helpers for other packages' tests (judgetest, placementtest...)
			// are harness too, kept beside what they exercise.
			if strings.Contains(filepath.ToSlash(path), "test/") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			from := groupOf(filepath.ToSlash(path))
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if !strings.HasPrefix(p, module) {
					continue
				}
				rel := strings.TrimPrefix(p, module)
				if strings.HasPrefix(rel, "test/") || strings.Contains(rel, "test/") {
					t.Errorf("%s imports the test harness %s", path, rel)
					continue
				}
				to, ok := strings.CutPrefix(rel, "internal/")
				if !ok || from == "" {
					continue
				}
				to, _, _ = strings.Cut(to, "/")
				if !slices.Contains(mayImport[from], to) {
					t.Errorf("%s (group %s) imports %s: group %s may import only %v", path, from, rel, from, mayImport[from])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// groupOf is the group of a file under internal/ ("" for cmd/ and for
// internal/'s own files).
func groupOf(path string) string {
	if strings.HasPrefix(path, "../") {
		return ""
	}
	g, _, ok := strings.Cut(path, "/")
	if !ok {
		return ""
	}
	return g
}

// TestGroups: every directory under internal/ belongs to a group the
// rules know.
func TestGroups(t *testing.T) {
	entries, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e, ".go") {
			continue
		}
		if _, ok := mayImport[e]; !ok {
			t.Errorf("internal/%s is in no group of internal/doc.go", e)
		}
	}
}
