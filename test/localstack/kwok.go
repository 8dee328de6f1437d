package localstack

import (
	"context"
	"fmt"

	"github.com/regosched/regosched/test/localcluster"
)

// Kwok makes sure the stack's cluster runs kwok, the stand-in for kubelets
// on the nodes it manages (localcluster.Kwok), starting it on first use,
// and returns it. Tests share it, as they share the cluster; it stops with
// the stack. Only nodes a test creates with Kwok.AddNodes are kwok's:
// the stack's own nodes, and the pods the other tests bind to them, are
// left alone.
func (s *Stack) Kwok(ctx context.Context) (*localcluster.Kwok, error) {
	k, err := s.cluster.Kwok(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting kwok: %w", err)
	}
	return k, nil
}

// BuildRegosched builds regosched (./cmd/regosched) from the checkout at
// root into out, for a harness that runs it beside regosched-scheduler.
func BuildRegosched(ctx context.Context, root, out string) error {
	return goBuild(ctx, root, out, "./cmd/regosched")
}
