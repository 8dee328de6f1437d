//go:build e2e

package localcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestControllerManager shows, with the real processes, that a Deployment
// rolls out and a node drains through evictions that respect a
// PodDisruptionBudget. The test plays scheduler and kubelet itself: it binds
// pods, reports them Ready and confirms their termination.
func TestControllerManager(t *testing.T) {
	ctx := t.Context()
	c := startTestCluster(t, 2)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, c)
		}
	})
	// A misspelt controller makes kcm exit at once; the error says why.
	if _, err := c.StartControllerManager(ctx, "deployment-controler"); err == nil ||
		!strings.Contains(err.Error(), "not in the list of known controllers") {
		t.Fatalf("StartControllerManager(unknown controller) error = %v, want kcm's own complaint", err)
	}
	start := time.Now()
	kcm, err := c.StartControllerManager(ctx)
	if err != nil {
		t.Fatalf("StartControllerManager() error = %v", err)
	}
	t.Logf("kube-controller-manager healthy after %s", time.Since(start).Round(time.Millisecond))

	client := c.Client()
	ns := metav1.NamespaceDefault
	k := &fakeKubelet{client: client, ns: ns}
	waitFor := func(what string, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		start := time.Now()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if kcm.Exited() {
				return false, kcm.ExitError()
			}
			return cond(ctx)
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
	}

	// The deployment controller creates a ReplicaSet, and the replicaset
	// controller its pods.
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, webDeployment(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
	waitFor("a ReplicaSet with 2 pods", func(ctx context.Context) (bool, error) {
		pods, err := k.pods(ctx)
		return err == nil && len(pods) == 2 && ownerKind(&pods[0]) == "ReplicaSet" && ownerKind(&pods[1]) == "ReplicaSet", err
	})
	pods, err := k.pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := client.AppsV1().ReplicaSets(ns).Get(ctx, metav1.GetControllerOf(&pods[0]).Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the pods' ReplicaSet: %v", err)
	}
	if owner := metav1.GetControllerOf(rs); owner == nil || owner.Kind != "Deployment" || owner.Name != "web" {
		t.Fatalf("ReplicaSet %s is controlled by %v, want Deployment web", rs.Name, owner)
	}
	onNode := map[string]string{} // node name -> pod name
	for i, p := range pods {
		node := fmt.Sprintf("node-%02d", i+1)
		if err := k.bind(ctx, p.Name, node); err != nil {
			t.Fatal(err)
		}
		if err := k.setReady(ctx, p.Name, true); err != nil {
			t.Fatal(err)
		}
		onNode[node] = p.Name
	}

	// The disruption controller computes how many pods may go; the eviction
	// API refuses an eviction when none may.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptrTo(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: webLabels},
		},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PDB: %v", err)
	}
	waitForBudget := func(what string, healthy, allowed int32) {
		t.Helper()
		waitFor(what, func(ctx context.Context) (bool, error) {
			got, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := got.Status
			return s.ObservedGeneration == got.Generation && s.ExpectedPods == 2 &&
				s.CurrentHealthy == healthy && s.DisruptionsAllowed == allowed, nil
		})
	}
	steps := []struct {
		name         string
		node02Ready  bool
		wantHealthy  int32
		wantAllowed  int32
		evictRefused bool // evicting node-01's pod must fail with 429
	}{
		{"both ready", true, 2, 1, false},
		{"one not ready", false, 1, 0, true},
		{"ready again", true, 2, 1, false},
	}
	for _, st := range steps {
		if err := k.setReady(ctx, onNode["node-02"], st.node02Ready); err != nil {
			t.Fatal(err)
		}
		waitForBudget(fmt.Sprintf("PDB %s: disruptionsAllowed=%d", st.name, st.wantAllowed), st.wantHealthy, st.wantAllowed)
		if st.evictRefused {
			if err := k.evict(ctx, onNode["node-01"]); !apierrors.IsTooManyRequests(err) {
				t.Fatalf("%s: evicting %s: got %v, want 429 Too Many Requests", st.name, onNode["node-01"], err)
			}
		}
	}

	// Drain node-01: cordon it, evict its pod (allowed), confirm the
	// termination as its kubelet would; the replacement then counts against
	// the budget until it runs Ready on node-02.
	if err := k.setUnschedulable(ctx, "node-01", true); err != nil {
		t.Fatal(err)
	}
	if err := k.evict(ctx, onNode["node-01"]); err != nil {
		t.Fatalf("draining node-01: evicting %s: %v", onNode["node-01"], err)
	}
	waitFor("the replacement pod", func(ctx context.Context) (bool, error) {
		pods, err := k.pods(ctx)
		if err != nil {
			return false, err
		}
		active := 0
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				// Only evicted pods terminate here; grace 0 is the kubelet's
				// "containers stopped".
				if err := k.finalize(ctx, p.Name); err != nil {
					return false, err
				}
				continue
			}
			active++
		}
		return len(pods) == 2 && active == 2, nil
	})
	waitForBudget("PDB during drain: disruptionsAllowed=0", 1, 0)
	if err := k.evict(ctx, onNode["node-02"]); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s while its replacement is not ready: got %v, want 429", onNode["node-02"], err)
	}
	waitFor("the replacement Ready on node-02", func(ctx context.Context) (bool, error) {
		return k.settle(ctx, []string{"node-02"})
	})
	waitForBudget("PDB after drain: disruptionsAllowed=1", 2, 1)
	if pods, err := k.podsOn(ctx, "node-01"); err != nil || len(pods) != 0 {
		t.Fatalf("pods on drained node-01 = %d (err %v), want 0", len(pods), err)
	}

	// Roll out a new template after the maintenance: one surge pod at a
	// time, each old pod going only once a new one is available.
	if err := k.setUnschedulable(ctx, "node-01", false); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"rollout":"2"}}}}}`)
	if _, err := client.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("updating deployment: %v", err)
	}
	waitFor("the rollout to complete", func(ctx context.Context) (bool, error) {
		if _, err := k.settle(ctx, []string{"node-01", "node-02"}); err != nil {
			return false, err
		}
		d, err := client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.Replicas == 2 && s.UpdatedReplicas == 2 &&
			s.AvailableReplicas == 2 && s.UnavailableReplicas == 0, nil
	})
	rss, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing ReplicaSets: %v", err)
	}
	got := map[string]int32{}
	for _, rs := range rss.Items {
		got[rs.Annotations["deployment.kubernetes.io/revision"]] = *rs.Spec.Replicas
	}
	if len(got) != 2 || got["1"] != 0 || got["2"] != 2 {
		t.Errorf("ReplicaSet replicas by revision = %v, want map[1:0 2:2]", got)
	}
}

var webLabels = map[string]string{"app": "web"}

func webDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: webLabels},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptrTo(intstr.FromInt32(1)),
					MaxUnavailable: ptrTo(intstr.FromInt32(0)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: webLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "registry.k8s.io/pause:3.10",
				}}},
			},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

func ownerKind(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return ref.Kind
	}
	return ""
}
