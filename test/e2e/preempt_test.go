//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localcluster"
	ls "github.com/regosched/regosched/test/localstack"
)

// Priority classes of the preemption tests. Pods without a class have
// priority 0, below both.
const (
	prioLow  = "e2e-low"  // 100
	prioHigh = "e2e-high" // 100000

	// bigCPU is more than half of a fake node's 32 CPUs: two such pods do
	// not fit on one node.
	bigCPU = "20"

	preemptTimeout = time.Minute
	// quietFor is how long a pod must stay pending, with no victim
	// touched, for "no preemption" to count as shown. The scheduler retries
	// an unschedulable pod after at most a few seconds of back-off.
	quietFor = 8 * time.Second
)

func ensurePriorityClasses(t *testing.T, ctx context.Context) {
	t.Helper()
	for name, value := range map[string]int32{prioLow: 100, prioHigh: 100000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		_, err := stack.Client().SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating priority class %s: %v", name, err)
		}
	}
}

// pinned is p for the regosched scheduler (fixture's Schedulable),
// confined to node with a nodeSelector on the hostname label, of priority
// class class ("" for none) and, if cpu is not "", of that CPU request.
func pinned(p *fixture.PodWrapper, node, class, cpu string) *corev1.Pod {
	pod := p.Schedulable().NodeSelector(localcluster.LabelHostname, node).PriorityClassName(class).Obj()
	if cpu != "" {
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	return pod
}

// waitPreempted creates preemptor and waits until it is bound, force-deleting
// victims the scheduler marked for deletion on the way; it returns the
// preemptor's node and the victims.
func waitPreempted(t *testing.T, ctx context.Context, preemptor *corev1.Pod) (string, []string) {
	t.Helper()
	ns := preemptor.Namespace
	created, err := stack.Client().CoreV1().Pods(ns).Create(ctx, preemptor, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var victims []string
	var node string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, preemptTimeout, true, func(ctx context.Context) (bool, error) {
		gone, err := ls.RemoveTerminating(ctx, stack.Client(), ns)
		if err != nil {
			return false, err
		}
		victims = append(victims, gone...)
		p, err := stack.Client().CoreV1().Pods(ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		reason, _ := stack.FailedSchedulingReason(ctx, created)
		t.Fatalf("%s not bound (victims so far %v; last FailedScheduling: %s): %v", created.Name, victims, reason, err)
	}
	t.Logf("%s bound to %s; victims force-deleted after the scheduler marked them: %v", created.Name, node, victims)
	return node, victims
}

// waitNotPreempted creates pod and checks for quietFor after its first
// FailedScheduling event that it stays pending and that no pod of its
// namespace is marked for deletion; it logs the last FailedScheduling
// message.
func waitNotPreempted(t *testing.T, ctx context.Context, pod *corev1.Pod) {
	t.Helper()
	ns := pod.Namespace
	created, err := stack.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, preemptTimeout, true, func(ctx context.Context) (bool, error) {
		reason, err = stack.FailedSchedulingReason(ctx, created)
		return reason != "", err
	})
	if err != nil {
		t.Fatalf("waiting for a FailedScheduling event of %s: %v", created.Name, err)
	}
	until := time.Now().Add(quietFor)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*quietFor, true, func(ctx context.Context) (bool, error) {
		list, err := stack.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				return false, fmt.Errorf("%s was marked for deletion (preempted)", p.Name)
			}
			if p.Name == created.Name && p.Spec.NodeName != "" {
				return false, fmt.Errorf("%s bound to %s", p.Name, p.Spec.NodeName)
			}
		}
		return time.Now().After(until), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := stack.Client().CoreV1().Pods(ns).Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NominatedNodeName != "" {
		t.Errorf("%s nominated to %s: the scheduler planned a preemption", got.Name, got.Status.NominatedNodeName)
	}
	if reason, err = stack.FailedSchedulingReason(ctx, got); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s still pending after %s, nothing evicted: %s", got.Name, quietFor, reason)
}

// podsLeft returns the names of the pods of ns, sorted by the API.
func podsLeft(t *testing.T, ctx context.Context, ns string) []string {
	t.Helper()
	list, err := stack.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// A high-priority data pod that needs the node of a low-priority data pod of
// its cluster, on a node that is also full (a big low-priority plain pod):
// the scheduler's own dry run picks only the plain pod as its victim (it
// knows nothing of the rule), and regosched's preempt verb adds the
// conflicting data pod. Both go, and the pod lands there. Without the
// added victim the plain pod alone would go and the pod would stay pending.
func TestPreemptionEvictsConflictingLowerPriorityPeer(t *testing.T) {
	const ns = "e2e-preempt"
	ctx := setup(t, ns)
	ensurePriorityClasses(t, ctx)
	node := nodes(t, ctx, 1)[0]

	place(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("es-data-low").Elasticsearch("es", "data"), node, prioLow, ""))
	place(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("big-low"), node, prioLow, bigCPU))

	got, victims := waitPreempted(t, ctx,
		pinned(fixture.MakePod().Namespace(ns).Name("es-data-high").Elasticsearch("es", "data"), node, prioHigh, bigCPU),
	)
	if got != node {
		t.Errorf("es-data-high bound to %s, want %s", got, node)
	}
	for _, want := range []string{"es-data-low", "big-low"} {
		found := false
		for _, v := range victims {
			found = found || v == want
		}
		if !found {
			t.Errorf("%s was not preempted (victims %v)", want, victims)
		}
	}
	if left := podsLeft(t, ctx, ns); len(left) != 1 || left[0] != "es-data-high" {
		t.Errorf("pods left: %v, want only es-data-high", left)
	}
	noViolations(t, ctx, ns)
}

// The conflict is the rule alone (the node has room for both): the
// scheduler's dry run reprieves every pod (its filters see no problem),
// finds no victim on the node and never asks regosched's preempt verb. So
// the high-priority pod stays pending. Known limitation of the extender
// protocol in kube-scheduler v1.37 (see the report); this test states the
// wanted behaviour and only runs with REGOSCHED_E2E_KNOWN_ISSUES=1.
func TestPreemptionRuleOnlyConflict(t *testing.T) {
	if os.Getenv("REGOSCHED_E2E_KNOWN_ISSUES") != "1" {
		t.Skip("known limitation: kube-scheduler finds no preemption victim when only the extender objects; REGOSCHED_E2E_KNOWN_ISSUES=1 runs it")
	}
	const ns = "e2e-preempt-rule"
	ctx := setup(t, ns)
	ensurePriorityClasses(t, ctx)
	node := nodes(t, ctx, 1)[0]

	place(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("es-data-low").Elasticsearch("es", "data"), node, prioLow, ""))
	got, victims := waitPreempted(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("es-data-high").Elasticsearch("es", "data"), node, prioHigh, ""))
	if got != node || len(victims) != 1 || victims[0] != "es-data-low" {
		t.Errorf("es-data-high on %s with victims %v, want %s with victim es-data-low", got, victims, node)
	}
	noViolations(t, ctx, ns)
}

// A protected peer is never evicted: a low-priority Redis master shares a
// full node with a big low-priority plain pod; a high-priority master of
// the same cluster needs that node. The scheduler's dry run would evict the
// plain pod; regosched must add the conflicting master, which the policy
// protects, and so drop the node: nothing is evicted, the new master waits.
// The second case makes the master itself the scheduler's victim (it is the
// big pod): regosched must refuse it too.
func TestPreemptionSparesProtectedMaster(t *testing.T) {
	tests := []struct {
		name      string
		masterCPU string
		filler    bool
	}{
		{"conflicting master added by regosched", "", true},
		{"master chosen by the scheduler", bigCPU, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("e2e-preempt-protected-%d", i)
			ctx := setup(t, ns)
			ensurePriorityClasses(t, ctx)
			node := nodes(t, ctx, 1)[0]

			place(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0"), node, prioLow, tt.masterCPU))
			if tt.filler {
				place(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("big-low"), node, prioLow, bigCPU))
			}
			before := podsLeft(t, ctx, ns)

			// The node is full, so the built-in filters reject it before
			// regosched's filter is asked; only the preempt verb decides.
			waitNotPreempted(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("cache-1-master").Redis("cache", "master", "1"), node, prioHigh, bigCPU))
			if after := podsLeft(t, ctx, ns); len(after) != len(before)+1 {
				t.Errorf("pods before %v, after %v", before, after)
			}
			noViolations(t, ctx, ns)
		})
	}
}

// A conflicting peer of higher priority is not preempted: a low-priority
// data pod needs the node of a high-priority data pod of its cluster, on a
// node full of a priority-0 plain pod. The scheduler would evict the plain
// pod, which cannot help; regosched's preempt verb drops the node, since
// the conflicting peer has a higher priority.
func TestPreemptionSparesHigherPriorityPeer(t *testing.T) {
	const ns = "e2e-preempt-higher"
	ctx := setup(t, ns)
	ensurePriorityClasses(t, ctx)
	node := nodes(t, ctx, 1)[0]

	place(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("es-data-high").Elasticsearch("es", "data"), node, prioHigh, ""))
	place(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("big-zero"), node, "", bigCPU))
	// The node is full, so the built-in filters reject it before
	// regosched's filter is asked: the preempt verb drops the node.
	waitNotPreempted(t, ctx, pinned(fixture.MakePod().Namespace(ns).Name("es-data-low").Elasticsearch("es", "data"), node, prioLow, bigCPU))
	noViolations(t, ctx, ns)
}
