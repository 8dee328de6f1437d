package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// stopGrace is how long a child gets between SIGTERM and SIGKILL. The
// apiserver drains requests on SIGTERM; a few seconds are plenty for a test
// cluster, and a stuck child must not stall a test run for long.
const stopGrace = 10 * time.Second

// Process is a child process started by a Cluster. Its stdout and stderr go
// to LogPath.
type Process struct {
	// Name identifies the process in logs and names its log file.
	Name string
	// LogPath is the file receiving the process's stdout and stderr.
	LogPath string

	cmd      *exec.Cmd
	log      logrus.FieldLogger
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// StartChild starts path with args in dir as a child of this process, in its
// own process group and killed with it, appending its output to logPath
// (so that a restart under the same name keeps the earlier run's output for
// post-mortems). Only Stop or Kill ends it; other harnesses (localredis) use
// it for their servers. Outside Linux it returns CheckOS's error.
func StartChild(log logrus.FieldLogger, dir, name, logPath, path string, args ...string) (*Process, error) {
	return startChild(log, dir, name, logPath, path, "", nil, args...)
}

// startChild is StartChild with env added to the child's environment and,
// unless argv0 is empty, argv0 as the child's argv[0] instead of path.
func startChild(log logrus.FieldLogger, dir, name, logPath, path, argv0 string, env []string, args ...string) (*Process, error) {
	if err := CheckOS(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: opening log: %w", name, err)
	}
	// The child holds its own descriptor once started.
	defer out.Close()

	cmd := exec.Command(path, args...)
	if argv0 != "" {
		cmd.Args[0] = argv0
	}
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = ChildSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{
		Name:    name,
		LogPath: logPath,
		cmd:     cmd,
		log:     log.WithFields(logrus.Fields{"process": name, "pid": cmd.Process.Pid}),
		done:    make(chan struct{}),
	}
	p.log.WithField("log", logPath).Debug("started")
	go func() {
		p.waitErr = cmd.Wait()
		p.log.WithError(p.waitErr).Debug("exited")
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id, which is also its process group id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns the exit status once Done is closed (nil for exit code 0).
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL if the process has
// not exited after a grace period, and returns once it has been reaped.
// It is safe to call more than once and after the process exited by itself.
func (p *Process) Stop() { p.stop(stopGrace) }

// Kill is Stop without the grace period, for children that persist nothing
// and would only delay the end (a Redis master waits for its replicas on
// SIGTERM).
func (p *Process) Kill() { p.stop(0) }

// Exited reports whether the process has exited and been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	b, _ := os.ReadFile(p.LogPath)
	return lastLines(string(b), n)
}

// ExitError describes a process that exited while it was expected to run,
// with the end of its log, which usually says why.
func (p *Process) ExitError() error { return p.exitError() }

func (p *Process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		pgid := p.PID()
		select {
		case <-p.done:
		default:
			if grace == 0 {
				p.signalGroup(pgid, syscall.SIGKILL)
				<-p.done
				break
			}
			p.signalGroup(pgid, syscall.SIGTERM)
			timer := time.NewTimer(grace)
			defer timer.Stop()
			select {
			case <-p.done:
			case <-timer.C:
				p.log.Warnf("still running %s after SIGTERM; sending SIGKILL", grace)
				p.signalGroup(pgid, syscall.SIGKILL)
				<-p.done
			}
		}
		// Whatever the leader spawned and left behind in its group goes
		// too; ESRCH (an empty group) is the normal case.
		p.signalGroup(pgid, syscall.SIGKILL)
		p.log.Debug("stopped")
	})
}

// exitError describes a process that exited while it was expected to run,
// with the end of its log, which usually says why.
func (p *Process) exitError() error {
	tail, _ := os.ReadFile(p.LogPath)
	exit := p.waitErr
	if exit == nil {
		exit = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited early: %w; end of %s:\n%s",
		p.Name, exit, p.LogPath, lastLines(string(tail), 20))
}
