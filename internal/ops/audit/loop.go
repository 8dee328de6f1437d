package audit

import (
	"context"
	"errors"
	"time"
)

// Loop runs a pass at once, then every interval after the previous pass
// ended and whenever trigger fires, until ctx ends. Triggers that arrive
// during a pass, or together, make one more pass: a burst of role changes
// costs one. interval <= 0 leaves only the first pass and the triggered
// ones. Start it once the cache has synced; a failed pass is logged and
// counted (regosched_audit_runs_total{result="error"}), and the next is
// tried as usual.
//
// The sender of trigger should not block: a channel of capacity 1 and
// select { case trigger <- struct{}{}: default: } lose no change, since a
// pending trigger already means "a pass after now".
func (a *Auditor) Loop(ctx context.Context, interval time.Duration, trigger <-chan struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case _, ok := <-trigger:
			if !ok {
				trigger = nil // closed: periodic passes only
			}
		}
		trigger = drain(trigger)
		report, err := a.Run(ctx)
		switch {
		case err == nil:
			if a.afterReport != nil {
				a.afterReport(ctx, report)
			}
		case ctx.Err() != nil:
		case errors.Is(err, ErrNoPolicy):
			a.log.WithError(err).Debug("audit pass skipped")
		default:
			a.log.WithError(err).Error("audit pass failed")
		}
		if a.afterPass != nil {
			a.afterPass()
		}
		timer.Stop()
		if interval > 0 {
			timer.Reset(interval) // since Go 1.23 no stale tick survives Reset
		}
	}
}

// drain empties trigger, whose pending signals the pass about to run
// answers, and returns it, or nil once it is closed.
func drain(trigger <-chan struct{}) <-chan struct{} {
	for {
		select {
		case _, ok := <-trigger:
			if !ok {
				return nil
			}
		default:
			return trigger
		}
	}
}
