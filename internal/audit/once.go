package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
)

// DefaultSyncTimeout bounds Once's wait for the API server and the initial
// lists of pods and nodes.
const DefaultSyncTimeout = 30 * time.Second

// OnceOptions configure Once.
type OnceOptions struct {
	Client kubernetes.Interface
	Policy *policy.Policy
	// SyncTimeout bounds the wait for the API server; 0 means
	// DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Log receives the placement cache's and the pass's logs; required.
	Log logrus.FieldLogger
	// AfterPass, when set, is given the report and the cache it was made
	// from, before the cache stops (`regosched audit --plan`).
	AfterPass func(context.Context, Placements, Report) error
}

// Once is `regosched audit`: it lists the cluster's bound pods and nodes
// into a placement cache of its own, as `regosched serve` keeps one, and
// runs one pass with no Events and no metrics.
func Once(ctx context.Context, opts OnceOptions) (Report, error) {
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	pol := opts.Policy
	current := func() *policy.Policy { return pol }
	ctx, cancel := context.WithCancel(ctx)
	cache, err := placement.New(opts.Client, policy.Describer(current), opts.Log.WithField("component", "placement"))
	if err != nil {
		cancel()
		return Report{}, fmt.Errorf("placement cache: %w", err)
	}
	cache.Start(ctx)
	// The informers stop only once ctx is cancelled: cancel, then wait.
	defer func() { cancel(); cache.Shutdown() }()
	if err := cache.SyncWithin(ctx, opts.Client, opts.SyncTimeout); err != nil {
		return Report{}, err
	}
	a, err := New(Config{Cache: cache, Policies: current, Log: opts.Log.WithField("component", "audit")})
	if err != nil {
		return Report{}, err
	}
	report, err := a.Run(ctx)
	if err != nil || opts.AfterPass == nil {
		return report, err
	}
	return report, opts.AfterPass(ctx, cache, report)
}
