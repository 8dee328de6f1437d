//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/plumbing/leader"
)

// rolloutTimeout bounds each wait of the rollout and drain test: a new
// pod is bound, its process syncs and turns Ready in a few seconds.
const rolloutTimeout = 45 * time.Second

// deploy/ha's Deployment, PodDisruptionBudget and Service, run by the real
// kube-controller-manager (deployment, replicaset, disruption, endpointslice
// controllers), with a real regosched process for every pod (haKubelet,
// auto): a rollout completes with the Deployment's surge-first strategy,
// two replicas Ready throughout and a leader at the end; a drain of the
// leader's node evicts its pod (allowed: both replicas are Ready), the
// label moves to the other pod, the budget refuses a second eviction until
// the replacement is Ready, then allows it.
func TestHADeploymentRolloutAndDrain(t *testing.T) {
	const ns = "e2e-ha-rollout"
	ctx := setup(t, ns)
	if _, err := stack.ControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	m := renderHA(t, ctx, ns)
	client := stack.Client()
	dep, svc := m.Deployment.Name, m.Service.Name
	if _, err := client.CoreV1().Services(ns).Create(ctx, m.Service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, m.PDB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, m.Deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No garbage collector runs: the ReplicaSets go by hand, then setup's
	// clean-up deletes the pods.
	deleteQuietly(t, "the Deployment's objects", func(ctx context.Context) error {
		errs := []error{
			client.AppsV1().Deployments(ns).Delete(ctx, dep, metav1.DeleteOptions{}),
			client.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
			client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, m.PDB.Name, metav1.DeleteOptions{}),
			client.CoreV1().Services(ns).Delete(ctx, svc, metav1.DeleteOptions{}),
		}
		for _, err := range errs {
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	k := newHAKubelet(t, ns, fmt.Sprintf("regosched-e2e-%d", time.Now().UnixNano()))
	k.auto, k.nodes = true, nodes(t, ctx, 3)
	k.run(ctx)

	// One leader among two Ready replicas, its pod alone labelled and behind
	// the Service.
	leading := func(s haState) bool {
		return len(s.ready) == 2 && len(s.apiReady) == 2 && len(s.leaders) == 1 && len(s.refusing) == 1 &&
			slices.Equal(s.labelled, s.leaders) && slices.Equal(s.endpoints, s.leaders)
	}
	waitDeployment(t, ctx, ns, dep, "1")
	k.waitState(ctx, "a leader among the two replicas", svc, takeoverTimeout, leading)
	if e := k.unexpectedExits(); len(e) > 0 {
		t.Fatalf("processes exited by themselves:\n%s", strings.Join(e, "\n"))
	}

	// (a) Rollout: a new template, surge first.
	mon := watchHA(ctx, ns)
	start := time.Now()
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"regosched.io/e2e-rollout":"2"}}}}}`)
	if _, err := client.AppsV1().Deployments(ns).Patch(ctx, dep, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	newRS := waitDeployment(t, ctx, ns, dep, "2")
	rollout := time.Since(start)
	st := k.waitState(ctx, "a leader among the new replicas", svc, takeoverTimeout, leading)
	r := mon.stop()
	t.Logf("rollout complete after %s; during it: %d to %d pods not terminating, at least %d of them Ready, at most %d labelled at once, leaderless for %v",
		rollout.Round(time.Millisecond), r.minPods, r.maxPods, r.minReady, r.maxLabelled, r.gaps)
	if r.minReady < 2 {
		t.Errorf("only %d replicas Ready during the rollout, want 2 throughout (maxUnavailable 0)", r.minReady)
	}
	if r.maxPods > 3 {
		t.Errorf("%d pods at once during the rollout, want at most 3 (maxSurge 1)", r.maxPods)
	}
	for _, g := range r.gaps {
		if g > handoverTimeout {
			t.Errorf("no leader for %s during the rollout: longer than a released Lease takes (%s)", g, handoverTimeout)
		}
	}
	pods := podsOf(t, ctx, ns)
	for _, p := range pods {
		if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != newRS.Labels[appsv1.DefaultDeploymentUniqueLabelKey] {
			t.Errorf("pod %s of template %s left after the rollout", p.Name, p.Labels[appsv1.DefaultDeploymentUniqueLabelKey])
		}
	}

	// (b) Drain the leader's node: cordon it, evict the leader's pod.
	lead, other := st.leaders[0], st.refusing[0]
	node, otherNode := nodeOf(pods, lead), nodeOf(pods, other)
	if node == otherNode {
		t.Fatalf("both replicas on %s: a drain would take both", node)
	}
	k.hold.Store(true) // the replacement's image is "being pulled" until told
	cordon(t, ctx, node)
	drained := time.Now()
	if err := evict(ctx, ns, lead, false); err != nil {
		t.Fatalf("evicting the leader's pod %s with both replicas Ready: %v, want it allowed", lead, err)
	}
	var handover time.Duration
	k.waitState(ctx, "the other replica leading, labelled and behind the Service", svc, handoverTimeout, func(s haState) bool {
		if one(s.leaders, other) && one(s.labelled, other) && one(s.endpoints, other) {
			handover = time.Since(drained)
			return true
		}
		return false
	})
	waitBudget(t, ctx, ns, m.PDB.Name, 1, 0)
	if err := evict(ctx, ns, other, true); !apierrors.IsTooManyRequests(err) {
		t.Errorf("evicting %s, the only Ready replica, during the drain: %v, want 429 Too Many Requests", other, err)
	}
	k.hold.Store(false)
	waitBudget(t, ctx, ns, m.PDB.Name, 2, 1)
	ready := time.Since(drained)
	if err := evict(ctx, ns, other, true); err != nil {
		t.Errorf("evicting %s (dry run) once the replacement is Ready: %v, want it allowed", other, err)
	}
	k.waitState(ctx, "the replacement Ready as a standby", svc, takeoverTimeout, func(s haState) bool {
		return leading(s) && one(s.leaders, other)
	})
	t.Logf("drain of %s: the other replica led %s after the eviction; the replacement Ready and a second eviction allowed %s after it",
		node, handover.Round(time.Millisecond), ready.Round(time.Millisecond))
	for _, p := range podsOf(t, ctx, ns) {
		if p.Spec.NodeName == node {
			t.Errorf("pod %s still on drained node %s", p.Name, node)
		}
	}
	if e := k.unexpectedExits(); len(e) > 0 {
		t.Errorf("processes exited by themselves:\n%s", strings.Join(e, "\n"))
	}
}

// waitDeployment waits until Deployment name has rolled out revision: two
// updated replicas, both available, no other pod, the ReplicaSet of that
// revision at 2 Ready and every other at 0. It returns that ReplicaSet.
func waitDeployment(t *testing.T, ctx context.Context, ns, name, revision string) *appsv1.ReplicaSet {
	t.Helper()
	var got *appsv1.ReplicaSet
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, rolloutTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := stack.Client().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rss, err := stack.Client().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		last = fmt.Sprintf("generation %d observed %d, replicas %d updated %d ready %d available %d;",
			d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
		done := s.ObservedGeneration == d.Generation && s.Replicas == 2 && s.UpdatedReplicas == 2 &&
			s.ReadyReplicas == 2 && s.AvailableReplicas == 2 && s.UnavailableReplicas == 0
		got = nil
		for _, rs := range rss.Items {
			rev := rs.Annotations["deployment.kubernetes.io/revision"]
			last += fmt.Sprintf(" ReplicaSet revision %s: spec %d, ready %d;", rev, *rs.Spec.Replicas, rs.Status.ReadyReplicas)
			if rev == revision {
				got = rs.DeepCopy()
				done = done && *rs.Spec.Replicas == 2 && rs.Status.ReadyReplicas == 2
			} else {
				done = done && *rs.Spec.Replicas == 0 && rs.Status.Replicas == 0
			}
		}
		return done && got != nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for revision %s of Deployment %s: %v; last seen: %s", revision, name, err, last)
	}
	t.Logf("Deployment %s at revision %s: %s", name, revision, last)
	return got
}

// waitBudget waits until the disruption controller reports PDB name with
// healthy of 2 expected pods healthy and allowed disruptions.
func waitBudget(t *testing.T, ctx context.Context, ns, name string, healthy, allowed int32) {
	t.Helper()
	var last policyv1.PodDisruptionBudgetStatus
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, rolloutTimeout, true, func(ctx context.Context) (bool, error) {
		pdb, err := stack.Client().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = pdb.Status
		return last.ObservedGeneration == pdb.Generation && last.ExpectedPods == 2 &&
			last.CurrentHealthy == healthy && last.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		t.Fatalf("waiting for PDB %s at %d healthy, %d allowed: %v; last status %+v", name, healthy, allowed, err, last)
	}
	t.Logf("PDB %s: %d of %d healthy, %d disruption(s) allowed", name, last.CurrentHealthy, last.ExpectedPods, last.DisruptionsAllowed)
}

// evict asks the Eviction API to evict pod (a dry run when dryRun).
func evict(ctx context.Context, ns, pod string, dryRun bool) error {
	e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}}
	if dryRun {
		e.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return stack.Client().CoreV1().Pods(ns).EvictV1(ctx, e)
}

// cordon marks node unschedulable until the test ends.
func cordon(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	set := func(ctx context.Context, on bool) error {
		patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on)
		_, err := stack.Client().CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := set(ctx, false); err != nil {
			t.Errorf("clean-up: uncordoning %s: %v", node, err)
		}
	})
	if err := set(ctx, true); err != nil {
		t.Fatalf("cordoning %s: %v", node, err)
	}
}

func podsOf(t *testing.T, ctx context.Context, ns string) []corev1.Pod {
	t.Helper()
	list, err := stack.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: haSelector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func nodeOf(pods []corev1.Pod, name string) string {
	for _, p := range pods {
		if p.Name == name {
			return p.Spec.NodeName
		}
	}
	return ""
}

// haRecord is what watchHA saw.
type haRecord struct {
	minReady    int             // fewest pods Ready and not terminating
	minPods     int             // fewest pods not terminating
	maxPods     int             // most pods not terminating
	maxLabelled int             // most pods labelled at once
	gaps        []time.Duration // periods without a labelled pod
}

type haWatch struct {
	stop func() haRecord
}

// watchHA samples the extender pods of ns every 100 ms until stopped.
func watchHA(ctx context.Context, ns string) haWatch {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	rec := haRecord{minReady: 1 << 30, minPods: 1 << 30}
	var since time.Time // start of the current period without a label
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := stack.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: haSelector})
			if err == nil {
				pods, ready, labelled := 0, 0, 0
				for _, p := range list.Items {
					if p.DeletionTimestamp == nil {
						pods++
					}
					if p.DeletionTimestamp == nil && podReady(&p) {
						ready++
					}
					if p.Labels[leader.Label] == "true" {
						labelled++
					}
				}
				mu.Lock()
				rec.minReady, rec.maxLabelled = min(rec.minReady, ready), max(rec.maxLabelled, labelled)
				rec.minPods, rec.maxPods = min(rec.minPods, pods), max(rec.maxPods, pods)
				switch {
				case labelled == 0 && since.IsZero():
					since = time.Now()
				case labelled > 0 && !since.IsZero():
					rec.gaps = append(rec.gaps, time.Since(since).Round(time.Millisecond))
					since = time.Time{}
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return haWatch{stop: func() haRecord {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if !since.IsZero() {
			rec.gaps = append(rec.gaps, time.Since(since).Round(time.Millisecond))
		}
		return rec
	}}
}
