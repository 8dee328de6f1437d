package audit

import (
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Progress is how far Once is: listing the cluster, then judging.
type Progress struct {
	// Listed is true once the initial lists of pods and nodes are complete.
	Listed bool
	// Pods are the bound pods listed so far that the policy puts in a
	// group (the others are not kept); Nodes the nodes listed so far.
	Pods, Nodes int
	// Judged of ToJudge pods of the pass are judged: the pods that share a
	// group and a node with another pod, the only ones that can break a
	// rule. ToJudge is 0 before the pass.
	Judged, ToJudge int
}

// String is the progress line, without its prefix.
func (p Progress) String() string {
	if !p.Listed {
		return fmt.Sprintf("listing: %d pods, %d nodes so far", p.Pods, p.Nodes)
	}
	s := fmt.Sprintf("listed %d pods, %d nodes", p.Pods, p.Nodes)
	if p.ToJudge > 0 {
		s += fmt.Sprintf("; judged %d/%d pods", p.Judged, p.ToJudge)
	}
	return s
}

// ProgressPrinter writes Once's progress as lines to a terminal, at most
// one per interval, so that a long audit of a big cluster shows it is
// moving without flooding the screen; an audit shorter than one interval
// prints nothing. Create it with NewProgressPrinter; its Update is
// OnceOptions.Progress.
type ProgressPrinter struct {
	w      io.Writer
	prefix string
	clock  clock.PassiveClock
	every  time.Duration

	mu sync.Mutex
	// next is the earliest time of the next line.
	next time.Time
	// last is the latest progress, and printed the last line written ("":
	// none yet).
	last    Progress
	printed string
}

// NewProgressPrinter prints lines "<prefix><progress>" to w, the first one
// interval after now and at most one per interval after it.
func NewProgressPrinter(w io.Writer, prefix string, c clock.PassiveClock, interval time.Duration) *ProgressPrinter {
	return &ProgressPrinter{w: w, prefix: prefix, clock: c, every: interval, next: c.Now().Add(interval)}
}

// Update records p and prints it if an interval has passed since the last
// line (or the start).
func (pp *ProgressPrinter) Update(p Progress) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.last = p
	now := pp.clock.Now()
	if now.Before(pp.next) {
		return
	}
	pp.next = now.Add(pp.every)
	pp.printLocked()
}

// Done prints the latest progress, the final counts, if any line was
// printed and this one differs from it: once lines were shown, the last
// should be complete; a short audit stays quiet.
func (pp *ProgressPrinter) Done() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.printed != "" && pp.printed != pp.last.String() {
		pp.printLocked()
	}
}

func (pp *ProgressPrinter) printLocked() {
	line := pp.last.String()
	// A line that fails to reach a terminal is not worth failing the audit.
	_, _ = fmt.Fprintf(pp.w, "%s%s\n", pp.prefix, line)
	pp.printed = line
}
