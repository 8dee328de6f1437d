package localredis

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"github.com/sirupsen/logrus"
)

// process is one redis-server child. Its stdout and stderr, where Redis logs
// with an empty logfile setting, go to logPath.
type process struct {
	name    string
	logPath string

	cmd      *exec.Cmd
	log      logrus.FieldLogger
	done     chan struct{}
	waitErr  error
	killOnce sync.Once
}

// childSysProcAttr puts a child in its own process group, so that kill can
// signal everything it spawned, and asks the kernel to kill it if this
// process dies first, so that a crashed or killed test leaves nothing behind.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startProcess starts path with args in dir, appending its output to
// logPath: appending keeps the output of an earlier attempt (a port lost to
// a race) for post-mortems.
func startProcess(log logrus.FieldLogger, name, dir, logPath, path string, args ...string) (*process, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: opening log: %w", name, err)
	}
	// The child holds its own descriptor once started.
	defer out.Close()

	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{
		name:    name,
		logPath: logPath,
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

// exited reports whether the process has exited and been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the process group and returns once the process has
// been reaped. No graceful shutdown: nothing is persisted, and SIGTERM makes
// a Redis 7 master wait up to shutdown-timeout for its replicas.
// It is safe to call more than once and after the process exited by itself.
func (p *process) kill() {
	p.killOnce.Do(func() {
		pgid := p.cmd.Process.Pid
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			p.log.WithError(err).Warn("sending SIGKILL to process group")
		}
		<-p.done
		p.log.Debug("stopped")
	})
}

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	return lastLines(string(b), n)
}

// exitError describes a process that exited while it was expected to run,
// with the end of its log, which usually says why.
func (p *process) exitError() error {
	exit := p.waitErr
	if exit == nil {
		exit = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited early: %w; end of %s:\n%s",
		p.name, exit, p.logPath, p.logTail(20))
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
