//go:build !linux

package localcluster

import (
	"fmt"
	"runtime"
	"syscall"
)

// errOS is CheckOS's error outside Linux.
var errOS = fmt.Errorf("the local control plane needs Linux (GOOS=%s): it runs its processes in process groups "+
	"that the kernel kills with this one (Setpgid, Pdeathsig); run the demo and the e2e suite on Linux, "+
	"e.g. in a VM or container", runtime.GOOS)

// CheckOS returns nil on Linux, where the local control plane runs. Elsewhere
// it returns an error saying so, which Build, Start and StartChild return
// before doing anything.
func CheckOS() error { return errOS }

// ChildSysProcAttr is nil outside Linux: nothing starts a child there
// (StartChild returns CheckOS's error), and commands that other code runs
// with it (kubectl, go build) get the defaults.
func ChildSysProcAttr() *syscall.SysProcAttr { return nil }

// KillGroup returns CheckOS's error outside Linux, where no process group
// was started.
func KillGroup(int) error { return errOS }

// signalGroup is never reached outside Linux: no Process starts there.
func (p *Process) signalGroup(int, syscall.Signal) {}
