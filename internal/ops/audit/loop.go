package audit

import (
	"context"
	"errors"
	"time"
)

// DefaultTriggerGap is regosched serve's Config.TriggerGap: well inside
// the repair's default cooldown (2m), so a repair waits little for it.
const DefaultTriggerGap = 10 * time.Second

// Loop runs a pass at once, then every interval after the previous pass
// ended and whenever trigger fires, until ctx ends. Triggers that arrive
// during a pass, or together, make one more pass: a burst of role changes
// costs one. interval <= 0 leaves only the first pass and the triggered
// ones. Start it once the cache has synced; a failed pass is logged and
// counted (regosched_audit_runs_total{result="error"}), and the next is
// tried as usual.
//
// A trigger within Config.TriggerGap of the previous pass's end waits for
// the gap to pass; every trigger of that wait is answered by one pass.
//
// The sender of trigger should not block: a channel of capacity 1 and
// select { case trigger <- struct{}{}: default: } lose no change, since a
// pending trigger already means "a pass after now".
func (a *Auditor) Loop(ctx context.Context, interval time.Duration, trigger <-chan struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var ended, due time.Time // the end of the last pass; when timer fires, if set
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case _, ok := <-trigger:
			if !ok {
				trigger = nil // closed: periodic passes only
				break
			}
			if at := ended.Add(a.triggerGap); time.Now().Before(at) {
				if due.IsZero() || at.Before(due) { // else the timer's pass answers
					due = at
					timer.Reset(time.Until(at))
				}
				continue
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
		ended, due = time.Now(), time.Time{}
		timer.Stop()
		if interval > 0 {
			due = ended.Add(interval)
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
