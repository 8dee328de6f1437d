package benche2e

import (
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// progressEvery is how often a long phase says how far it has got.
const progressEvery = 10 * time.Second

// progress logs "what: done/total" every interval until stop is called, so
// that a phase of minutes (creating 10,000 pods, scheduling them) shows it is
// moving. stop waits for the reporter to return.
func progress(log logrus.FieldLogger, every time.Duration, what string, total int, done func() int) (stop func()) {
	start := time.Now()
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				log.Info(progressLine(what, done(), total, time.Since(start)))
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// progressLine is one report: the count, the share, the rate so far.
func progressLine(what string, done, total int, took time.Duration) string {
	line := fmt.Sprintf("%s: %d/%d", what, done, total)
	if total > 0 {
		line += fmt.Sprintf(" (%.0f%%)", 100*float64(done)/float64(total))
	}
	if s := took.Seconds(); s > 0 {
		line += fmt.Sprintf(", %.1f/s over %s", float64(done)/s, took.Round(time.Second))
	}
	return line
}
