package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockBuilds holds an exclusive lock on dir's builds until unlock: the
// e2e packages run in parallel and each asks for the control plane, and
// two cold builds of it at once take twice the time of one on a 2-core
// machine. The lock goes with the process, so a killed build frees it.
func lockBuilds(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the build lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("taking the build lock: %w", err)
	}
	return func() { _ = f.Close() }, nil
}
