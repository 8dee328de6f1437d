//go:build e2e

package localredis

import "syscall"

// signalZero is kill(pid, 0): nil while the process (or, for a negative pid,
// a process of the group) exists, ESRCH once it is gone.
func signalZero(pid int) error { return syscall.Kill(pid, 0) }
