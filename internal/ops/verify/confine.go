package verify

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ErrOutsideSuite is wrapped by the error of a suite whose snapshot is an
// absolute path or lies outside the suite's directory tree.
var ErrOutsideSuite = errors.New("outside the suite's directory; give --allow-outside-suite to read it")

// snapshotPath is the file the suite's snapshot names, relative to the
// suite's directory; unless allowOutside, it must lie in that directory's
// tree, symlinks resolved, so that a suite from elsewhere cannot make
// verify read any file of the machine.
func (s *Suite) snapshotPath(allowOutside bool) (string, error) {
	name, dir := s.Snapshot, filepath.Dir(s.Path())
	if filepath.IsAbs(name) {
		if allowOutside {
			return name, nil
		}
		return "", fmt.Errorf("snapshot %s: an absolute path, %w", name, ErrOutsideSuite)
	}
	path := filepath.Join(dir, name)
	if allowOutside {
		return path, nil
	}
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("snapshot %s: %w", name, ErrOutsideSuite)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", name, err)
	}
	realPath, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	if rel, err := filepath.Rel(realDir, realPath); err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("snapshot %s: resolves to %s, %w", name, realPath, ErrOutsideSuite)
	}
	return path, nil
}
