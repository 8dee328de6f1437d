package serve

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/bundles"
	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/shadow"
)

// shadowPolicy is the --shadow-policy bundle, its reloads and its judge.
type shadowPolicy struct {
	source *bundles.Source
	active *bundles.Active
	judge  *shadow.Shadow
}

// newShadowPolicy opens the shadow bundle with the active policy's checks
// (limits, verification, tests) so that a bundle that could never be
// activated is refused at start, not discovered on the first filter call.
func newShadowPolicy(ctx context.Context, opts Options, cache *placement.Cache, reg prometheus.Registerer, log logrus.FieldLogger) (*shadowPolicy, error) {
	cfg := opts.Policy
	// --policy-data edits the active policy only: a shadow is compared as
	// its bundle is.
	cfg.Path, cfg.DataFile = opts.ShadowPolicy, ""
	cfg.Log = log.WithField("component", "shadow-policy")
	src, err := bundles.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--shadow-policy %s: %w", opts.ShadowPolicy, err)
	}
	// Its reload metrics would collide with the active policy's names, so
	// they go to a registry of their own; the shadow's own are exported.
	active, err := bundles.NewActive(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	active.Store(src.First())
	judge, err := shadow.New(shadow.Config{
		Policies: active, NodeLabels: cache.NodeLabels, Registerer: reg, Log: log.WithField("component", "shadow"),
	})
	if err != nil {
		return nil, err
	}
	log.WithFields(logrus.Fields{"source": src.Description(), "revision": src.First().Revision()}).Info("shadow policy loaded; judged beside the active one, never enforced")
	return &shadowPolicy{source: src, active: active, judge: judge}, nil
}
