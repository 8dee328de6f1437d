// Package assembly opens what both front ends decide with, once: the
// policy source and the active policy, the placement cache re-indexed
// under every reloaded policy, the shadow policy and the decision log.
// `regosched serve` and regosched-scheduler's plugin each add their own
// parts around it (the HTTP server and the extender's decider; the
// framework's handle and informers).
package assembly

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/ops/shadow"
)

// Config is what Open assembles, and what it takes from the front end.
type Config struct {
	// Policy is where the policy comes from and the checks every bundle
	// passes; its Log, when nil, is Log's with component=policy.
	Policy bundles.Config
	// NewCache makes the placement cache over keys (the active policy's
	// grouping), from the front end's informers or a client of its own.
	NewCache func(keys placement.KeyFunc) (*placement.Cache, error)
	// Reindexed, when set, runs once the cache is re-indexed under a
	// reloaded policy (serve describes its pending pods again).
	Reindexed func(ctx context.Context)
	// ShadowPolicy, when set, is a bundle judged beside the active one and
	// never enforced, opened with Policy's checks.
	ShadowPolicy string
	// DecisionLog is the decision log, off when its Sink is nil; Open owns
	// the Sink from here on (closed if Open fails). Its Registerer and Log
	// are Open's.
	DecisionLog decisionlog.Config
	// Names are the shadow policy's and the decision log's names in
	// errors, as the operator wrote them.
	Names      Names
	Registerer prometheus.Registerer
	Log        logrus.FieldLogger
}

// Names are settings' names as one build's operator writes them: serve's
// flags or the plugin's args.
type Names struct{ ShadowPolicy, DecisionLog string }

// Parts are what Open made. Run keeps the policies current; Close flushes
// the decision log.
type Parts struct {
	Source *bundles.Source
	Active *bundles.Active
	Cache  *placement.Cache
	// Shadow is nil without Config.ShadowPolicy.
	Shadow *shadow.Bundle
	// DecisionLog is nil without a Config.DecisionLog Sink.
	DecisionLog *decisionlog.Logger

	reindexed func(ctx context.Context)
	log       logrus.FieldLogger
}

// Open loads the first policy, makes the placement cache over it, opens
// the shadow policy and starts the decision log, with their metrics on
// cfg.Registerer. Nothing reloads until Run.
func Open(ctx context.Context, cfg Config) (_ *Parts, err error) {
	if sink := cfg.DecisionLog.Sink; sink != nil {
		// decisionlog.New takes the sink over once it succeeds, the last step.
		defer func() {
			if err != nil {
				_ = sink.Close()
			}
		}()
	}
	if cfg.Log == nil || cfg.Registerer == nil || cfg.NewCache == nil {
		return nil, errors.New("assembly: Config.Log, Registerer and NewCache are required")
	}
	if cfg.Policy.Log == nil {
		cfg.Policy.Log = cfg.Log.WithField("component", "policy")
	}
	p := &Parts{reindexed: cfg.Reindexed, log: cfg.Log}
	if p.Source, err = bundles.Open(ctx, cfg.Policy); err != nil {
		return nil, err
	}
	if p.Active, err = bundles.NewActive(cfg.Registerer); err != nil {
		return nil, err
	}
	p.Active.Store(p.Source.First())
	if p.Cache, err = cfg.NewCache(policy.Describer(p.Active.Load)); err != nil {
		return nil, err
	}
	if err := p.Cache.RegisterMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if cfg.ShadowPolicy != "" {
		p.Shadow, err = shadow.Open(ctx, cfg.Policy, cfg.ShadowPolicy, shadow.Config{
			Nodes: p.Cache, Registerer: cfg.Registerer, Log: cfg.Log.WithField("component", "shadow"),
		})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", cfg.Names.ShadowPolicy, cfg.ShadowPolicy, err)
		}
	}
	if cfg.DecisionLog.Sink != nil {
		dl := cfg.DecisionLog
		dl.Registerer, dl.Log = cfg.Registerer, cfg.Log.WithField("component", "decision-log")
		if p.DecisionLog, err = decisionlog.New(dl); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Names.DecisionLog, err)
		}
	}
	return p, nil
}

// Run reloads the policy and the shadow policy when their bundles change,
// and judges the shadow's queue, until ctx ends.
func (p *Parts) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if reload := p.Source.Reloads(p.Active, p.reindex); reload != nil {
		wg.Go(func() { reload(ctx) })
	}
	if p.Shadow != nil {
		wg.Go(func() { p.Shadow.Run(ctx) })
	}
	wg.Wait()
}

// reindex builds the cache's index under pol, a reloaded policy, beside
// the old one and swaps index and policy together (store): a policy that
// groups pods differently must never judge with the old grouping.
func (p *Parts) reindex(ctx context.Context, pol *policy.Policy, store func()) {
	if err := p.Cache.SetKeyFunc(ctx, policy.Describer(func() *policy.Policy { return pol }), store); err != nil {
		p.log.WithError(err).Warn("policy not activated")
		return
	}
	if p.reindexed != nil {
		p.reindexed(ctx)
	}
}

// Close sends what the decision log holds, within
// decisionlog.CloseTimeout: a collector that does not take it costs those
// events (counted), not a stuck shutdown. Without a decision log it does
// nothing.
func (p *Parts) Close() error {
	if p.DecisionLog == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), decisionlog.CloseTimeout)
	defer cancel()
	if err := p.DecisionLog.Close(ctx); err != nil {
		return fmt.Errorf("closing the decision log: %w", err)
	}
	return nil
}
