package bundles

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regosched/regosched/internal/core/policy"
)

// Active holds the policy that decisions use now. Readers get a whole,
// compiled policy or none; a swap is one atomic store. It also remembers the
// last failed attempt to replace it, for /version and the logs.
type Active struct {
	p       atomic.Pointer[policy.Policy]
	info    *prometheus.GaugeVec
	reloads *prometheus.CounterVec

	mu      sync.Mutex
	lastErr error
	errAt   time.Time
}

// Status is what /version reports about the policy.
type Status struct {
	Revision  string    `json:"policyRevision,omitempty"`
	LastError string    `json:"policyLastError,omitempty"`
	ErrorTime time.Time `json:"policyLastErrorTime,omitzero"`
}

// NewActive returns an empty holder whose state is exported on reg.
func NewActive(reg prometheus.Registerer) (*Active, error) {
	a := &Active{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "regosched_policy_info",
			Help: "The active policy bundle: 1 for its revision, absent before one is active.",
		}, []string{"revision"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_policy_reloads_total",
			Help: "Attempts to replace the active policy: success, or failure (the previous policy stays).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{a.info, a.reloads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering policy metrics: %w", err)
		}
	}
	return a, nil
}

// Load returns the active policy, nil before the first Store.
func (a *Active) Load() *policy.Policy { return a.p.Load() }

// Store makes p the active policy.
func (a *Active) Store(p *policy.Policy) {
	a.p.Store(p)
	a.info.Reset()
	a.info.WithLabelValues(p.Revision()).Set(1)
	a.mu.Lock()
	a.lastErr = nil
	a.mu.Unlock()
}

// Replaced counts a successful replacement (after Store).
func (a *Active) Replaced() { a.reloads.WithLabelValues("success").Inc() }

// Failed records a policy that could not replace the active one.
func (a *Active) Failed(err error, at time.Time) {
	a.reloads.WithLabelValues("failure").Inc()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErr, a.errAt = err, at
}

// Status reports the active revision and the last failed replacement, if
// none succeeded since.
func (a *Active) Status() Status {
	var s Status
	if p := a.Load(); p != nil {
		s.Revision = p.Revision()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastErr != nil {
		s.LastError, s.ErrorTime = a.lastErr.Error(), a.errAt
	}
	return s
}
