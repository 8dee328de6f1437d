package serve

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/ops/shadow"
)

// shadowPolicy is the --shadow-policy bundle, its reloads and its judge.
type shadowPolicy struct {
	source *bundles.Source
	active *bundles.Active
	judge  *shadow.Shadow
}

// newShadowPolicy opens the shadow bundle with the active policy's checks
// (shadow.Open, as regosched-scheduler's plugin opens its shadowPolicy).
func newShadowPolicy(ctx context.Context, opts Options, cache *placement.Cache, reg prometheus.Registerer, log logrus.FieldLogger) (*shadowPolicy, error) {
	b, err := shadow.Open(ctx, opts.Policy, opts.ShadowPolicy, shadow.Config{
		NodeLabels: cache.NodeLabels, Registerer: reg, Log: log.WithField("component", "shadow"),
	})
	if err != nil {
		return nil, fmt.Errorf("--shadow-policy %s: %w", opts.ShadowPolicy, err)
	}
	log.WithFields(logrus.Fields{"source": b.Source.Description(), "revision": b.Source.First().Revision()}).Info("shadow policy loaded; judged beside the active one, never enforced")
	return &shadowPolicy{source: b.Source, active: b.Active, judge: b.Shadow}, nil
}
