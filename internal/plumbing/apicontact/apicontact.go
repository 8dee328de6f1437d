// Package apicontact tells whether regosched still hears from the API
// server. Informers keep serving their last state when the API server is
// gone, so a replica cut off from it would go on deciding on stale
// placements; readiness turns false instead once contact has been lost for
// longer than a stated threshold.
package apicontact

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/clock"
)

// DefaultThreshold is how long contact may be lost before readiness turns
// false: longer than a watch's usual reconnect, far shorter than a failover.
const DefaultThreshold = 30 * time.Second

// Ping asks the API server something cheap; nil means it answered.
type Ping func(ctx context.Context) error

// Config wires a Watch.
type Config struct {
	Ping Ping
	// Threshold is how long contact may be lost (DefaultThreshold when 0);
	// the API server is asked every Threshold/3, at least once a second.
	Threshold  time.Duration
	Clock      clock.WithTicker
	Registerer prometheus.Registerer
	Log        logrus.FieldLogger
}

// Watch pings the API server and remembers when it last answered.
type Watch struct {
	cfg       Config
	period    time.Duration
	reachable prometheus.Gauge

	mu      sync.Mutex
	last    time.Time // last answer; the start counts as one
	lastErr error
}

// New prepares a Watch; Run pings.
func New(cfg Config) (*Watch, error) {
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	w := &Watch{
		cfg:    cfg,
		period: pingPeriod(cfg.Threshold),
		last:   cfg.Clock.Now(),
		reachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "regosched_api_server_reachable",
			Help: "1 while the API server answers regosched, 0 once it has not answered for the readiness threshold (--api-lost-after).",
		}),
	}
	w.reachable.Set(1)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(w.reachable); err != nil {
			return nil, fmt.Errorf("registering the API contact metric: %w", err)
		}
	}
	return w, nil
}

// minPeriod bounds how often a short threshold makes Run ping.
const minPeriod = 100 * time.Millisecond

// pingPeriod is a third of threshold: three pings fit in it, so one late
// tick of a busy process does not turn readiness false while the API
// server answers.
func pingPeriod(threshold time.Duration) time.Duration {
	return max(minPeriod, threshold/3)
}

// Run pings until ctx ends.
func (w *Watch) Run(ctx context.Context) {
	ticker := w.cfg.Clock.NewTicker(w.period)
	defer ticker.Stop()
	for {
		w.ping(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func (w *Watch) ping(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, w.period)
	err := w.cfg.Ping(pctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		if w.lastErr != nil && w.cfg.Log != nil {
			w.cfg.Log.Info("the API server answers again")
		}
		w.last, w.lastErr = w.cfg.Clock.Now(), nil
		w.reachable.Set(1)
		return
	}
	if w.lastErr == nil && w.cfg.Log != nil {
		w.cfg.Log.WithError(err).Warn("the API server does not answer")
	}
	w.lastErr = err
	if w.errLocked() != nil {
		w.reachable.Set(0)
	}
}

// Err is nil while the API server has answered within the threshold, else
// why regosched should not be trusted to decide.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errLocked()
}

func (w *Watch) errLocked() error {
	since := w.cfg.Clock.Since(w.last)
	if since <= w.cfg.Threshold {
		return nil
	}
	cause := w.lastErr
	if cause == nil {
		cause = errors.New("no ping has returned")
	}
	return fmt.Errorf("no answer from the API server for %s (threshold %s): the placement cache may be stale: %w",
		since.Round(time.Second), w.cfg.Threshold, cause)
}
