//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localstack"
)

// The reviewer's three ways one tenant, creating pods in its own namespace
// only, stalled every other team's repair, on the real API server: each
// test's victim namespace sorts after its tenant's, as the audit orders.

// A crowd of 15 Elasticsearch pods pinned to one node is 105 violations;
// the repair planned 100 a pass in the audit's order, so another
// namespace's violation was never planned, in plan mode nor in on mode.
func TestRepairNotStarvedByACrowd(t *testing.T) {
	tenant, victim := fresh("e2e-fair-order-a"), fresh("e2e-fair-order-b")
	ctx := setup(t, tenant, victim)
	n := nodes(t, ctx, 2)
	for i := range 15 {
		readyPod(t, ctx, fixture.MakePod().Namespace(tenant).Name(fmt.Sprintf("crowd-%d", i)).Elasticsearch("es", "data").Schedulable().Obj(), n[0])
	}
	pair := evictablePair(t, ctx, victim, n[1], 0)
	waitAllowed(t, ctx, victim)

	t.Run("plan mode plans it", func(t *testing.T) {
		// The stack's regosched runs as deployed: --repair=plan.
		if !hasEvent(ctx, victim, pair[1], "RepairPlanned", "would evict") {
			t.Errorf("no RepairPlanned event on %s/%s behind the tenant's 105 violations", victim, pair[1])
		}
	})
	t.Run("on mode repairs it in its turn", func(t *testing.T) {
		kubelet(t, ctx, victim)
		r := startRepairer(t, ctx, "repair-fair-order", victim, "--repair-cooldown=1s", "--repair-timeout=30s")
		gone := waitEvicted(t, ctx, repairWait, victim)
		if len(gone) == 0 {
			t.Fatalf("%s: nothing evicted %s after the repair started; its log:\n%s", victim, repairWait, r.LogTail(40))
		}
		t.Logf("evicted %v", gone)
		if !hasEvent(ctx, victim, gone[0], "Repaired", "cleared the violation") {
			t.Errorf("no Repaired event on %s/%s", victim, gone[0])
		}
	})
}

// Six evictable pairs of a tenant spent the hourly budget (6, all
// namespaces) on the tenant's own evictions, one at a time, before the
// victim's turn came: "no repair: 6 repairs were started in the last hour".
func TestRepairBudgetSharedByNamespace(t *testing.T) {
	tenant, victim := fresh("e2e-fair-budget-a"), fresh("e2e-fair-budget-b")
	ctx := setup(t, tenant, victim)
	n := nodes(t, ctx, 7)
	for i := range 6 {
		evictablePair(t, ctx, tenant, n[i], i)
	}
	evictablePair(t, ctx, victim, n[6], 0)
	waitAllowed(t, ctx, tenant, victim)
	kubelet(t, ctx, tenant, victim)
	r := startRepairer(t, ctx, "repair-fair-budget", victim, "--repair-cooldown=1s", "--repair-timeout=30s", "--repair-max-per-hour=6")

	var tenantBefore []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*repairWait, true, func(ctx context.Context) (bool, error) {
		tenantBefore = started(ctx, tenant)
		return len(started(ctx, victim)) > 0, nil
	})
	if err != nil {
		t.Fatalf("the victim's pair was not repaired within %s; the tenant's evictions: %v; the repairer's log:\n%s",
			2*repairWait, tenantBefore, r.LogTail(40))
	}
	// Round robin from the first namespace: the tenant's first repair, then
	// the victim's; its share is 3 of the 6.
	if len(tenantBefore) > 1 {
		t.Errorf("the tenant's evictions before the victim's: %v, want at most one (its turn came first)", tenantBefore)
	}
	if target := started(ctx, victim)[0]; !hasEvent(ctx, victim, target, "Repaired", "cleared the violation") {
		t.Errorf("no Repaired event on %s/%s", victim, target)
	}
}

// A state ConfigMap grown to the API server's 1 MiB limit (the reviewer's
// flipping role labels reached 1.22 MB) failed every write, the
// write-ahead record of a repair with it: every repair stopped. Now it is
// cut to its bounds before each write, and the repair goes on.
func TestRepairStateAtTheLimit(t *testing.T) {
	victim := fresh("e2e-fair-state")
	ctx := setup(t, victim)
	n := nodes(t, ctx, 1)
	evictablePair(t, ctx, victim, n[0], 0)
	waitAllowed(t, ctx, victim)
	kubelet(t, ctx, victim)

	cmName := "repair-fair-state-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	seed := seedState(t, time.Now().Add(-time.Minute), 1<<20-len("state.json")-64)
	cms := stack.Client().CoreV1().ConfigMaps(victim)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName},
		Data: map[string]string{"state.json": seed}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cms.Delete(context.Background(), cmName, metav1.DeleteOptions{}) })
	r := startRepairer(t, ctx, "repair-fair-state", victim, "--repair-cooldown=1s", "--repair-timeout=30s", "--repair-configmap="+cmName)

	if gone := waitEvicted(t, ctx, repairWait, victim); len(gone) == 0 {
		t.Fatalf("nothing evicted %s after the repair started, with the state at %d bytes; its log:\n%s", repairWait, len(seed), r.LogTail(40))
	}
	cm, err := cms.Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size := len(cm.Data["state.json"]); size > 256<<10 {
		t.Errorf("the state is %d bytes after the repair, want at most 256 KiB", size)
	}
	if got := metricValue(t, ctx, r.BaseURL, "regosched_repair_state_write_failures_total"); got != 0 {
		t.Errorf("regosched_repair_state_write_failures_total = %v, want 0", got)
	}
}

// fresh is name made unique to the run: Events, which the tests read,
// outlive the pods into a run with -count.
func fresh(name string) string {
	return name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// seedState is a repair state of role changes seen at at, size bytes long.
func seedState(t *testing.T, at time.Time, size int) string {
	t.Helper()
	stamp, _ := json.Marshal(at.UTC())
	var b strings.Builder
	b.WriteString(`{"failovers":{`)
	for i := 0; ; i++ {
		entry := fmt.Sprintf(`"elasticsearch/e2e-flood-%d/es":%s`, i, stamp)
		if b.Len()+len(entry)+2 > size {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(entry)
	}
	b.WriteString(`}}`)
	if !json.Valid([]byte(b.String())) {
		t.Fatal("the seeded state is not JSON")
	}
	return b.String()
}

// readyPod creates pod on node and reports it running and ready, as a
// kubelet would: a PodDisruptionBudget counts ready pods only.
func readyPod(t *testing.T, ctx context.Context, pod *corev1.Pod, node string) {
	t.Helper()
	pod.Spec.NodeName = node
	pods := stack.Client().CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Phase = corev1.PodRunning
	created.Status.PodIP = "127.0.0.1"
	created.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// evictablePair is two Elasticsearch data pods of ns's StatefulSet on one
// node, under a PodDisruptionBudget of minAvailable 1 (created once per
// namespace): the repair evicts one. It returns their names.
func evictablePair(t *testing.T, ctx context.Context, ns, node string, i int) [2]string {
	t.Helper()
	var names [2]string
	for j := range 2 {
		names[j] = fmt.Sprintf("es-%d-%d", i, j)
		readyPod(t, ctx, fixture.MakePod().Namespace(ns).Name(names[j]).Elasticsearch("es", "data").Schedulable().
			StatefulSet("es-data", "0b5a1c1e-5e55-4e5e-9e55-5e55e5da7a00").Obj(), node)
	}
	if i == 0 {
		one := intstr.FromInt32(1)
		_, err := stack.Client().PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "es"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "elasticsearch"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = stack.Client().PolicyV1().PodDisruptionBudgets(ns).Delete(context.Background(), "es", metav1.DeleteOptions{})
		})
	}
	return names
}

// waitAllowed waits until the disruption controller lets each namespace's
// budget spare a pod.
func waitAllowed(t *testing.T, ctx context.Context, namespaces ...string) {
	t.Helper()
	if _, err := stack.ControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, rolloutTimeout, true, func(ctx context.Context) (bool, error) {
			pdb, err := stack.Client().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "es", metav1.GetOptions{})
			return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed > 0, nil
		})
		if err != nil {
			t.Fatalf("the budget of %s never allowed a disruption: %v", ns, err)
		}
	}
}

// kubelet removes the pods of namespaces marked for deletion until the
// test ends, as kubelets would once their containers stopped: the
// violation then clears, and the repair ends Repaired.
func kubelet(t *testing.T, ctx context.Context, namespaces ...string) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, ns := range namespaces {
				_, _ = localstack.RemoveTerminating(ctx, stack.Client(), ns)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// started returns the pods of ns a repair started on, by their Events
// (RepairPlanned "starting: ..."), which outlive the pods evicted.
// A failed read is nothing seen: the caller polls again.
func started(ctx context.Context, ns string) []string {
	list, err := stack.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=RepairPlanned"})
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range list.Items {
		if strings.HasPrefix(e.Message, "starting: ") {
			out = append(out, e.InvolvedObject.Name)
		}
	}
	return out
}

// waitEvicted waits up to timeout for a repair started on a pod of ns,
// and returns the pods it started on.
func waitEvicted(t *testing.T, ctx context.Context, timeout time.Duration, ns string) []string {
	t.Helper()
	var got []string
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got = started(ctx, ns)
		return len(got) > 0, nil
	})
	return got
}
