package audit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/regosched/regosched/internal/core/policy"
)

// loopAuditor is an Auditor over an empty cache whose Loop reports each
// pass on the returned channel.
func loopAuditor(t *testing.T) (*Auditor, <-chan struct{}) {
	t.Helper()
	pol := defaultPolicy(t)
	log, _ := logtest.NewNullLogger()
	a, err := New(Config{Cache: emptyCache{}, Policies: func() *policy.Policy { return pol }, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	passes := make(chan struct{}, 100)
	a.afterPass = func() { passes <- struct{}{} }
	return a, passes
}

// startLoop runs Loop until the test ends, and waits for it to return.
func startLoop(t *testing.T, a *Auditor, interval time.Duration, trigger <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Loop(ctx, interval, trigger) }()
	t.Cleanup(func() { cancel(); <-done })
}

func await(t *testing.T, passes <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-passes:
	case <-time.After(10 * time.Second):
		t.Fatalf("no pass: %s", what)
	}
}

func TestLoopCoalescesTriggers(t *testing.T) {
	a, passes := loopAuditor(t)
	trigger := make(chan struct{}, 5)
	for range cap(trigger) {
		trigger <- struct{}{}
	}
	startLoop(t, a, time.Hour, trigger)
	await(t, passes, "the first, at once")
	if n := len(trigger); n != 0 {
		t.Errorf("%d triggers left after the first pass, want 0: a burst costs one pass", n)
	}
	trigger <- struct{}{}
	await(t, passes, "a trigger")
	select {
	case <-passes:
		t.Error("a pass nothing asked for")
	case <-time.After(50 * time.Millisecond):
	}
	if got := testutil.ToFloat64(a.runs.WithLabelValues("success")); got != 2 {
		t.Errorf("passes = %v, want 2", got)
	}
}

func TestLoopRunsEveryInterval(t *testing.T) {
	a, passes := loopAuditor(t)
	startLoop(t, a, time.Millisecond, nil)
	for i := range 3 {
		await(t, passes, fmt.Sprintf("interval %d", i+1))
	}
}

func TestLoopWithoutIntervalAndClosedTrigger(t *testing.T) {
	a, passes := loopAuditor(t)
	trigger := make(chan struct{})
	close(trigger)
	startLoop(t, a, 0, trigger)
	await(t, passes, "the first, at once")
	select {
	case <-passes:
		t.Error("a pass without interval or trigger")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestLoopStopsWithContext(t *testing.T) {
	a, _ := loopAuditor(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() { defer close(done); a.Loop(ctx, time.Millisecond, nil) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Loop did not return once ctx ended")
	}
}

// TestLoopSpacesTriggeredPasses: a storm of triggers (a tenant flipping
// role labels) costs one pass per TriggerGap, not one per change, while a
// periodic pass due before the gap's end still comes on time.
func TestLoopSpacesTriggeredPasses(t *testing.T) {
	const gap = 300 * time.Millisecond
	for _, tt := range []struct {
		name     string
		interval time.Duration
		// atLeast and atMost bound the time from the first pass to the next.
		atLeast, atMost time.Duration
	}{
		{"a storm waits for the gap", time.Hour, gap - 50*time.Millisecond, 5 * time.Second},
		{"a periodic pass due sooner is not delayed", 50 * time.Millisecond, 0, gap - 50*time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, passes := loopAuditor(t)
			a.triggerGap = gap
			trigger := make(chan struct{}, 1)
			startLoop(t, a, tt.interval, trigger)
			await(t, passes, "the first, at once")
			start := time.Now()
			storm := time.NewTicker(5 * time.Millisecond)
			defer storm.Stop()
			for range 20 {
				<-storm.C
				select {
				case trigger <- struct{}{}:
				default:
				}
				if len(passes) > 0 {
					break
				}
			}
			await(t, passes, "the one the storm asks for")
			if took := time.Since(start); took < tt.atLeast || took > tt.atMost {
				t.Errorf("next pass %s after the first, want between %s and %s", took, tt.atLeast, tt.atMost)
			}
			if tt.interval < time.Hour {
				return
			}
			select {
			case <-passes:
				t.Error("a second pass for one storm")
			case <-time.After(gap + 100*time.Millisecond):
			}
			if got := testutil.ToFloat64(a.runs.WithLabelValues("success")); got != 2 {
				t.Errorf("passes = %v, want 2", got)
			}
		})
	}
}
