package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
)

// DefaultSyncTimeout bounds Once's wait for the API server and the initial
// lists of pods and nodes.
const DefaultSyncTimeout = 30 * time.Second

// listPoll is how often Once reads the placement cache's counts while it
// lists, for OnceOptions.Progress: often enough that a throttled printer
// always has a fresh count to print.
const listPoll = 200 * time.Millisecond

// OnceOptions configure Once.
type OnceOptions struct {
	Client kubernetes.Interface
	Policy *policy.Policy
	// SyncTimeout bounds the wait for the API server; 0 means
	// DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Log receives the placement cache's and the pass's logs; required.
	Log logrus.FieldLogger
	// Namespace, when set, keeps in the report only the violations and
	// unjudged pods that involve a pod of this namespace, and counts its
	// pods alone. Every pod is still listed and judged: a pod elsewhere
	// can break a rule with one of the namespace, and only judging both
	// sides finds every such pair.
	Namespace string
	// AfterPass, when set, is given the report and the cache it was made
	// from, before the cache stops (`regosched audit --plan`).
	AfterPass func(context.Context, Placements, Report) error
	// Progress, when set, is told how far Once is, often (several times a
	// second while it lists, after every pod it judges): it must be cheap,
	// and throttling is its own (ProgressPrinter). Calls never overlap.
	Progress func(Progress)
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
	stopWatching := watchListing(ctx, cache, opts.Progress)
	err = cache.SyncWithin(ctx, opts.Client, opts.SyncTimeout)
	stopWatching()
	if err != nil {
		return Report{}, err
	}
	cfg := Config{Cache: cache, Policies: current, Log: opts.Log.WithField("component", "audit")}
	if opts.Progress != nil {
		listed := Progress{Listed: true, Pods: cache.PodCount(), Nodes: cache.NodeCount()}
		opts.Progress(listed)
		cfg.Judged = func(done, total int) {
			p := listed
			p.Judged, p.ToJudge = done, total
			opts.Progress(p)
		}
	}
	a, err := New(cfg)
	if err != nil {
		return Report{}, err
	}
	report, err := a.Run(ctx)
	if err != nil {
		return report, err
	}
	if opts.Namespace != "" {
		report = report.inNamespace(opts.Namespace, cache.Indexed())
	}
	if opts.AfterPass == nil {
		return report, nil
	}
	return report, opts.AfterPass(ctx, cache, report)
}

// watchListing tells progress the cache's counts every listPoll until the
// returned stop is called, which returns once progress is no longer
// called. A nil progress watches nothing.
func watchListing(ctx context.Context, cache *placement.Cache, progress func(Progress)) (stop func()) {
	if progress == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(listPoll)
		defer tick.Stop()
		for {
			progress(Progress{Pods: cache.PodCount(), Nodes: cache.NodeCount()})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// inNamespace is r restricted to the violations and skipped pods that
// involve a pod of ns, with Pods counting ns's pods among indexed.
func (r Report) inNamespace(ns string, indexed []placement.Indexed) Report {
	in := func(key string) bool { return strings.HasPrefix(key, ns+"/") }
	out := Report{PolicyRevision: r.PolicyRevision, Violations: []Violation{}}
	for _, v := range r.Violations {
		if slices.ContainsFunc(v.Pods, in) {
			out.Violations = append(out.Violations, v)
		}
	}
	for _, key := range r.Skipped {
		if in(key) {
			out.Skipped = append(out.Skipped, key)
		}
	}
	for _, x := range indexed {
		if x.Pod.Namespace == ns {
			out.Pods++
		}
	}
	return out
}
