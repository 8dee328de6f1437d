package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Label marks the pod of the replica that leads; the Service selects it, so
// the scheduler reaches the leader alone while every synced replica is
// Ready (a rollout and a drain then proceed as for any Deployment).
const Label = "regosched.io/leader"

// LeaseAnnotation names the Lease (namespace/name) a labelled pod leads
// for, so that a new leader removes stale labels of its own instance only,
// not those of another regosched in the same namespace.
const LeaseAnnotation = "regosched.io/leader-lease"

// podLabel sets and removes Label on this replica's own pod.
type podLabel struct {
	client    kubernetes.Interface
	namespace string
	name      string
	lease     string // namespace/name of the Lease
	log       logrus.FieldLogger
}

// patch sets Label to "true" (value) or removes it (nil) on the pod named,
// with the Lease it stands for.
func (l *podLabel) patch(ctx context.Context, name string, value *string) error {
	var lease *string
	if value != nil {
		lease = &l.lease
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]*string{Label: value},
		"annotations": map[string]*string{LeaseAnnotation: lease},
	}})
	if err != nil {
		return fmt.Errorf("encoding the leader label patch: %w", err)
	}
	_, err = l.client.CoreV1().Pods(l.namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) && value == nil {
		return nil // a pod that is gone carries no label
	}
	if err != nil {
		return fmt.Errorf("patching label %s of pod %s/%s: %w", Label, l.namespace, name, err)
	}
	return nil
}

// mark labels this replica's pod as the leader's, retrying until it holds
// or ctx ends (a leader the Service does not select serves no one), then
// removes the label from any other pod still carrying it for the same Lease
// (a leader that died without cleaning up).
func (l *podLabel) mark(ctx context.Context) {
	leader := "true"
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := l.patch(ctx, l.name, &leader); err != nil {
			l.log.WithError(err).Warn("cannot label this pod as the leader's; retrying")
			return false, nil
		}
		return true, nil
	})
	if ctx.Err() != nil {
		return
	}
	pods, err := l.client.CoreV1().Pods(l.namespace).List(ctx, metav1.ListOptions{LabelSelector: Label + "=true"})
	if err != nil {
		l.log.WithError(err).Warn("cannot list pods that carry the leader label")
		return
	}
	for _, p := range pods.Items {
		if p.Name == l.name || p.Annotations[LeaseAnnotation] != l.lease {
			continue // ours, or another instance's
		}
		if err := l.patch(ctx, p.Name, nil); err != nil {
			l.log.WithError(err).Warn("cannot remove a stale leader label")
			continue
		}
		l.log.WithField("pod", p.Name).Info("removed a stale leader label")
	}
}

// unmark removes the label from this replica's pod.
func (l *podLabel) unmark(ctx context.Context) error {
	return l.patch(ctx, l.name, nil)
}
