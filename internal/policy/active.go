package policy

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Active holds the policy that decisions use now. Readers get a whole,
// compiled policy or none; a swap is one atomic store.
type Active struct {
	p    atomic.Pointer[Policy]
	info *prometheus.GaugeVec
}

// NewActive returns an empty holder whose revision is exported on reg.
func NewActive(reg prometheus.Registerer) (*Active, error) {
	a := &Active{info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regosched_policy_info",
		Help: "The active policy bundle: 1 for its revision, absent before one is active.",
	}, []string{"revision"})}
	if err := reg.Register(a.info); err != nil {
		return nil, fmt.Errorf("registering policy metrics: %w", err)
	}
	return a, nil
}

// Load returns the active policy, nil before the first Store.
func (a *Active) Load() *Policy { return a.p.Load() }

// Store makes p the active policy.
func (a *Active) Store(p *Policy) {
	a.p.Store(p)
	a.info.Reset()
	a.info.WithLabelValues(p.Revision()).Set(1)
}
