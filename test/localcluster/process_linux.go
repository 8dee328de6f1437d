package localcluster

import (
	"errors"
	"syscall"
)

// CheckOS returns nil on Linux, where the local control plane runs. Elsewhere
// it returns an error saying so, which Build, Start and StartChild return
// before doing anything.
func CheckOS() error { return nil }

// ChildSysProcAttr puts a child in its own process group, so that Stop can
// signal everything it spawned, and asks the kernel to kill it if this
// process dies first, so that a crashed or killed test leaves nothing behind.
func ChildSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// KillGroup sends SIGKILL to the process group pgid: a child started with
// ChildSysProcAttr leads a group of its own, whose id is its pid. The error is
// syscall.Kill's (ESRCH once the group is empty).
func KillGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }

func (p *Process) signalGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.WithError(err).Warnf("sending %v to process group", sig)
	}
}
