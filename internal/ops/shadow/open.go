package shadow

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regosched/regosched/internal/core/bundles"
)

// Bundle is a shadow policy loaded from a bundle: its source, the policy
// it last loaded, and the Shadow that judges with it. Both front ends
// (regosched serve --shadow-policy, regosched-scheduler's shadowPolicy)
// open it here, through the one assembly of internal/frontend/assembly.
type Bundle struct {
	Source *bundles.Source
	Active *bundles.Active
	Shadow *Shadow
}

// Open loads the shadow bundle at path with the checks of the active
// policy's configuration (limits, verification, tests, polling), so that
// a bundle that could never be activated is refused at start rather than
// discovered on the first filter judgement, and returns it with a Shadow
// (cfg, its Policies the bundle's) judging it. The active policy's data
// overlay is not applied: a shadow is compared as its bundle is.
func Open(ctx context.Context, active bundles.Config, path string, cfg Config) (*Bundle, error) {
	if path == "" {
		return nil, errors.New("shadow: no bundle path")
	}
	if cfg.Log == nil {
		return nil, errors.New("shadow: no logger")
	}
	bc := active
	bc.Path, bc.DataFile = path, ""
	bc.Log = cfg.Log.WithField("component", "shadow-policy")
	src, err := bundles.Open(ctx, bc)
	if err != nil {
		return nil, fmt.Errorf("loading the shadow bundle: %w", err)
	}
	// Its reload metrics would collide with the active policy's names, so
	// they go to a registry of their own; the shadow's own are exported.
	a, err := bundles.NewActive(prometheus.NewRegistry())
	if err != nil {
		return nil, fmt.Errorf("the shadow bundle's reloads: %w", err)
	}
	a.Store(src.First())
	cfg.Policies = a
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Bundle{Source: src, Active: a, Shadow: s}, nil
}

// Run judges the Shadow's queue and reloads the bundle, as the active
// policy's are, until ctx ends.
func (b *Bundle) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { b.Shadow.Run(ctx) })
	if reload := b.Source.Reloads(b.Active, nil); reload != nil {
		wg.Go(func() { reload(ctx) })
	}
	wg.Wait()
}
