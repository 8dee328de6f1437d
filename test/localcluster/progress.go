package localcluster

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// progressInterval is how often a running build says how far it has got:
// often enough to show it is alive, rarely enough not to flood a test log.
const progressInterval = 10 * time.Second

// keptOutputLines bounds the build output kept for an error message.
const keptOutputLines = 30

// cachedStaleReason is go list's StaleReason for a main package whose
// compiled form is in the build cache: go build only links it, and names no
// package on -v.
const cachedStaleReason = "not installed but available in build cache"

// buildProgress follows the output of "go build -v", which names each
// package on a line of its own as it compiles it, and logs how far the build
// has got against the number of packages "go list" expects it to compile.
// It is the build command's standard output and error (an io.Writer); tick
// logs, at most once per progressInterval.
type buildProgress struct {
	log      logrus.FieldLogger
	what     string          // the binaries, e.g. "kube-apiserver, kube-scheduler"
	deps     map[string]bool // every package of the build; nil when go list failed
	expected int             // packages go list expects compiled
	start    time.Time

	mu       sync.Mutex
	partial  []byte          // the start of a line not ended yet
	compiled map[string]bool // packages named so far
	other    []string        // the last lines naming no package (errors, downloads)
	logged   time.Time       // of the last progress line; start before the first
}

// newBuildProgress returns a follower of a build of what that started at
// start, given the packages of the build (deps) and those it has to compile
// (expected); deps nil means unknown, and then any line that looks like an
// import path counts.
func newBuildProgress(log logrus.FieldLogger, what string, deps []string, expected int, start time.Time) *buildProgress {
	p := &buildProgress{
		log:      log,
		what:     what,
		expected: expected,
		start:    start,
		compiled: map[string]bool{},
		logged:   start,
	}
	if deps != nil {
		p.deps = make(map[string]bool, len(deps))
		for _, d := range deps {
			p.deps[d] = true
		}
	}
	return p
}

// Write takes the build's output, counting each package line once.
func (p *buildProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.partial = append(p.partial, b...)
			return n, nil
		}
		line := string(append(p.partial, b[:i]...))
		p.partial = p.partial[:0]
		b = b[i+1:]
		p.line(line)
	}
}

// line counts or keeps one line of output; p.mu is held.
func (p *buildProgress) line(line string) {
	line = strings.TrimRight(line, "\r")
	if p.isPackage(line) {
		p.compiled[line] = true
		return
	}
	if line == "" {
		return
	}
	p.other = append(p.other, line)
	if len(p.other) > keptOutputLines {
		p.other = p.other[len(p.other)-keptOutputLines:]
	}
}

// isPackage reports whether line names a package of the build: one of deps
// when known, else anything shaped like an import path (go's other lines,
// "go: downloading ..." or "# pkg" before compiler errors, have spaces, a
// colon or a '#').
func (p *buildProgress) isPackage(line string) bool {
	if p.deps != nil {
		return p.deps[line]
	}
	return line != "" && !strings.ContainsAny(line, " \t:#")
}

// tick logs how far the build has got if progressInterval has passed
// since the last progress line (or the start).
func (p *buildProgress) tick(now time.Time) {
	p.mu.Lock()
	if now.Sub(p.logged) < progressInterval {
		p.mu.Unlock()
		return
	}
	p.logged = now
	msg := p.messageLocked(now)
	p.mu.Unlock()
	p.log.Info(msg)
}

// message says how far the build has got at now, e.g.
// "building kube-apiserver, kubectl: 412/1850 packages (1m20s)".
func (p *buildProgress) message(now time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.messageLocked(now)
}

func (p *buildProgress) messageLocked(now time.Time) string {
	elapsed := now.Sub(p.start).Round(time.Second)
	done := len(p.compiled)
	switch {
	case p.deps == nil:
		return fmt.Sprintf("building %s: %d packages compiled (%s)", p.what, done, elapsed)
	case done == 0 && p.expected == 0:
		return fmt.Sprintf("building %s: every package is in the build cache, linking (%s)", p.what, elapsed)
	case done >= p.expected:
		// The last packages are compiled: what remains is linking, which
		// names nothing on -v and takes a while for the big binaries.
		return fmt.Sprintf("building %s: %d/%d packages, linking (%s)", p.what, done, max(done, p.expected), elapsed)
	default:
		return fmt.Sprintf("building %s: %d/%d packages (%s)", p.what, done, p.expected, elapsed)
	}
}

// run runs cmd with its output going to p, ticking p meanwhile.
func (p *buildProgress) run(cmd *exec.Cmd) error {
	cmd.Stdout = p
	cmd.Stderr = p
	stop := make(chan struct{})
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		// Ticks finer than progressInterval, so that a line comes about
		// every interval even while only the linker runs.
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				p.tick(now)
			}
		}
	}()
	err := cmd.Run()
	close(stop)
	<-ticking
	return err
}

// compiledCount is the number of packages compiled so far.
func (p *buildProgress) compiledCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.compiled)
}

// output returns the last lines that named no package, for an error.
func (p *buildProgress) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := p.other
	if len(p.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(p.partial))
	}
	return strings.Join(lines, "\n")
}

// parseGoList reads the output of go list -deps with the format
// listFormat: every package of the build (deps), and how many of them go
// build will compile rather than take from the build cache (expected).
func parseGoList(out string) (deps []string, expected int, err error) {
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		fields := strings.SplitN(line, "\t", 3)
		if len(fields) != 3 {
			return nil, 0, fmt.Errorf("unexpected go list line %q", line)
		}
		deps = append(deps, fields[0])
		if fields[1] == "true" && fields[2] != cachedStaleReason {
			expected++
		}
	}
	return deps, expected, nil
}

// listFormat is the go list -f template parseGoList reads.
const listFormat = "{{.ImportPath}}\t{{.Stale}}\t{{.StaleReason}}"
