package localstack

import (
	"context"
	"fmt"

	"github.com/regosched/regosched/test/localcluster"
)

// Controllers are the kube-controller-manager controllers ControllerManager
// runs: Deployment rollouts (deployment, replicaset), evictions that respect
// a PodDisruptionBudget (disruption), and the EndpointSlices of Services
// (endpointslice), which show which pods a Service selects. None of them
// acts on the bare pods the other tests create.
var Controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"disruption-controller",
	"endpointslice-controller",
}

// ControllerManager makes sure one kube-controller-manager with Controllers
// runs against the stack's cluster, starting it on first use (and again if
// it exited), and returns it. Tests share it, as they share the cluster; it
// stops with the stack. No garbage collector runs: a test deletes the
// ReplicaSets and pods of its Deployments itself.
func (s *Stack) ControllerManager(ctx context.Context) (*localcluster.Process, error) {
	s.kcmMu.Lock()
	defer s.kcmMu.Unlock()
	if s.kcm != nil && !s.kcm.Exited() {
		return s.kcm, nil
	}
	if s.kcm != nil {
		s.log.WithError(s.kcm.ExitError()).Warn("kube-controller-manager had exited; starting it again")
	}
	p, err := s.cluster.StartControllerManager(ctx, Controllers...)
	if err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	s.kcm = p
	return p, nil
}
