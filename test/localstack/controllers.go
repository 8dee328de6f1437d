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
// acts on the bare pods the other tests create. The statefulset-controller
// is not one of them (see StatefulSetController).
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

// StatefulSetControllers are what StatefulSetController runs. It leaves
// alone a pod whose controller reference names a StatefulSet that does not
// exist (the bare pods of BitnamiClusterPod), but not a StatefulSet that
// does: TestQuorumSizeFromTheStatefulSet creates one of three replicas and
// makes its pods by hand, which a running statefulset-controller would
// make first. ControllerManager's process stays up once a test has started
// it, so this controller runs in one of its own, for one test's duration.
var StatefulSetControllers = []string{"statefulset-controller"}

// StatefulSetController starts a kube-controller-manager of its own
// (statefulset-controller.log in the cluster folder) with
// StatefulSetControllers, for a test whose StatefulSets must recreate
// their pods; the test stops it when it ends.
func (s *Stack) StatefulSetController(ctx context.Context) (*localcluster.Process, error) {
	p, err := s.cluster.StartControllerManagerAs(ctx, "statefulset-controller", StatefulSetControllers...)
	if err != nil {
		return nil, fmt.Errorf("starting the statefulset-controller: %w", err)
	}
	return p, nil
}
