package internal

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most lines a product (non-test) Go file may have: a
// longer one is split into files named for what they hold, in its package.
const maxLines = 400

// TestProductFileSize holds every product Go file of internal/, cmd/ and
// scheduler/ to maxLines. Test files, and the test helpers in directories
// named test or ending in "test" (judgetest, placementtest...), are left
// out, as is testdata, which Go never builds.
func TestProductFileSize(t *testing.T) {
	for _, root := range []string{".", "../cmd", "../scheduler"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != root && (strings.HasSuffix(d.Name(), "test") || d.Name() == "testdata") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if n := lineCount(b); n > maxLines {
				t.Errorf("%s has %d lines, more than %d: split it into files named for what they hold", filepath.ToSlash(path), n, maxLines)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// lineCount counts lines as wc -l does, plus a last line without a newline.
func lineCount(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}
