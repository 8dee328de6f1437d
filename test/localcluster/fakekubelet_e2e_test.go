//go:build e2e

package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// fakeKubelet does, through the API, what kube-scheduler and the kubelets of
// a real cluster would do for the test's pods.
type fakeKubelet struct {
	client kubernetes.Interface
	ns     string
	next   int // round robin over nodes in settle
}

func (k *fakeKubelet) pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := k.client.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return list.Items, nil
}

func (k *fakeKubelet) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := k.client.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("listing pods on %s: %w", node, err)
	}
	return list.Items, nil
}

func (k *fakeKubelet) bind(ctx context.Context, pod, node string) error {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := k.client.CoreV1().Pods(k.ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("binding %s to %s: %w", pod, node, err)
	}
	return nil
}

// setReady reports the pod Running with its Ready condition as given.
func (k *fakeKubelet) setReady(ctx context.Context, name string, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := k.client.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodRunning
		now := metav1.Now()
		for _, typ := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
			setCondition(&pod.Status, corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: now})
		}
		_, err = k.client.CoreV1().Pods(k.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting %s ready=%v: %w", name, ready, err)
	}
	return nil
}

func setCondition(s *corev1.PodStatus, cond corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == cond.Type {
			s.Conditions[i] = cond
			return
		}
	}
	s.Conditions = append(s.Conditions, cond)
}

// finalize deletes a terminating pod at once, as its kubelet does once the
// containers have stopped.
func (k *fakeKubelet) finalize(ctx context.Context, name string) error {
	err := k.client.CoreV1().Pods(k.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

func (k *fakeKubelet) evict(ctx context.Context, name string) error {
	return k.client.CoreV1().Pods(k.ns).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns},
	})
}

func (k *fakeKubelet) setUnschedulable(ctx context.Context, node string, on bool) error {
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on))
	if _, err := k.client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting %s unschedulable=%v: %w", node, on, err)
	}
	return nil
}

// settle moves every pod one step on: terminating ones are finalized,
// unbound ones bound to nodes round robin, bound ones reported Ready. It
// reports whether all pods were already running Ready.
func (k *fakeKubelet) settle(ctx context.Context, nodes []string) (bool, error) {
	pods, err := k.pods(ctx)
	if err != nil {
		return false, err
	}
	done := true
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
			err = k.finalize(ctx, p.Name)
		case p.Spec.NodeName == "":
			err = k.bind(ctx, p.Name, nodes[k.next%len(nodes)])
			k.next++
		case !podReady(&p):
			err = k.setReady(ctx, p.Name, true)
		default:
			continue
		}
		if err != nil {
			return false, err
		}
		done = false
	}
	return done, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
