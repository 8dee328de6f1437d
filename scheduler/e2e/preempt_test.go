//go:build e2e

// Package e2e runs regosched-scheduler, built from this checkout, against a
// real kube-apiserver (test/localcluster) and checks what only an
// in-process plugin can do: default preemption evicting a lower-priority
// peer that breaks one of regosched's rules.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localcluster"
	ls "github.com/regosched/regosched/test/localstack"
)

const (
	nodes     = 3
	ns        = "shop"
	prioLow   = "plugin-low"  // 100
	prioHigh  = "plugin-high" // 100000
	waitLimit = 2 * time.Minute
	// quietFor is how long a pod must stay pending, with no pod marked for
	// deletion, for "no preemption" to count as shown; the scheduler
	// retries an unschedulable pod after a few seconds of back-off.
	quietFor = 8 * time.Second
)

// pluginCluster is a control plane with regosched-scheduler built, and the
// deployed plugin configuration pointed at it: what each test of this
// package starts from.
type pluginCluster struct {
	c   *localcluster.Cluster
	bin string // regosched-scheduler
	cfg []byte // its KubeSchedulerConfiguration
}

// startPluginCluster builds the control plane (cached) and regosched-scheduler
// and starts a cluster of n nodes, stopped when the test ends.
func startPluginCluster(t *testing.T, n int) pluginCluster {
	t.Helper()
	if err := localcluster.CheckOS(); err != nil {
		t.Skip(err)
	}
	ctx := t.Context()
	log := logrus.New()
	log.SetOutput(os.Stderr)
	root, err := localcluster.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := localcluster.Build(ctx, localcluster.BuildOptions{RepoRoot: root, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "regosched-scheduler")
	if err := ls.BuildPluginScheduler(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	c, err := localcluster.Start(ctx, localcluster.Config{Binaries: bins, Nodes: n, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cfg, err := ls.PluginSchedulerConfig(root, c.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	return pluginCluster{c: c, bin: bin, cfg: cfg}
}

// startCluster runs a control plane with nodes nodes and regosched-scheduler
// with the deployed plugin configuration.
func startCluster(t *testing.T) *localcluster.Cluster {
	t.Helper()
	ctx := t.Context()
	pc := startPluginCluster(t, nodes)
	c, bin, cfg := pc.c, pc.bin, pc.cfg
	sched, err := c.StartSchedulerBinary(ctx, bin, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sched.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(sched.LogPath); err == nil {
				t.Logf("regosched-scheduler log (tail):\n%s", tail(b, 4000))
			}
		}
	})
	client := c.Client()
	for name, value := range map[string]int32{prioLow: 100, prioHigh: 100000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func create(t *testing.T, client kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// waitBound waits until pod is bound and returns its node.
func waitBound(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) string {
	t.Helper()
	var node string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitLimit, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		t.Fatalf("%s not bound: %v (last FailedScheduling: %s)", pod.Name, err, failedScheduling(t, client, pod))
	}
	return node
}

// waitPreempted waits until pod is bound, removing the pods its preemption
// marked for deletion as kubelets would, and returns its node and those
// victims.
func waitPreempted(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) (node string, victims []string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitLimit, true, func(ctx context.Context) (bool, error) {
		gone, err := ls.RemoveTerminating(ctx, client, ns)
		if err != nil {
			return false, err
		}
		victims = append(victims, gone...)
		got, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = got.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		t.Fatalf("%s not bound (victims %v): %v (last FailedScheduling: %s)", pod.Name, victims, err, failedScheduling(t, client, pod))
	}
	return node, slices.Compact(victims)
}

// failedScheduling is the message of pod's newest FailedScheduling event,
// or "" when there is none.
func failedScheduling(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) string {
	t.Helper()
	reason, err := ls.FailedSchedulingReason(t.Context(), client, pod)
	if err != nil {
		t.Fatal(err)
	}
	return reason
}

// mastersApart fails the test when two masters of cache share a node.
func mastersApart(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]string{}
	for _, p := range list.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Labels[fixture.LabelComponent] != "master" {
			continue
		}
		if other, ok := on[p.Spec.NodeName]; ok {
			t.Errorf("masters %s and %s share node %s", other, p.Name, p.Spec.NodeName)
		}
		on[p.Spec.NodeName] = p.Name
	}
}

// staysPending fails the test unless p stays pending for quietFor with no
// pod marked for deletion, and then deletes p.
func staysPending(t *testing.T, client kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, waitLimit, true, func(context.Context) (bool, error) {
		return failedScheduling(t, client, p) != "", nil
	})
	if err != nil {
		t.Fatalf("no FailedScheduling event for %s: %v", p.Name, err)
	}
	deadline := time.Now().Add(quietFor)
	for time.Now().Before(deadline) {
		list, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range list.Items {
			if q.DeletionTimestamp != nil || (q.Name == p.Name && q.Spec.NodeName != "") {
				t.Fatalf("pod %s: node %q, deletion %v: want nothing preempted and %s pending", q.Name, q.Spec.NodeName, q.DeletionTimestamp, p.Name)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s pending: %s", p.Name, failedScheduling(t, client, p))
	if err := client.CoreV1().Pods(ns).Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
}

// One master and one data pod per node: a fourth of either fits nowhere.
// A data pod of higher priority preempts exactly one low-priority data pod,
// the one on the node it gets; of equal priority it preempts nothing. A
// master of higher priority preempts nothing either: the policy protects
// masters from preemption, as the extender's preempt verb does.
func TestPreemptionOfAConflictingPeer(t *testing.T) {
	c := startCluster(t)
	client := c.Client()

	bound := map[string]string{} // pod name -> node
	for i := range nodes {
		for _, p := range []*corev1.Pod{
			fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("cache-%d-master", i)).Redis("cache", "master", fmt.Sprint(i)).
				Schedulable().PriorityClassName(prioLow).Obj(),
			fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("logs-data-%d", i)).Elasticsearch("logs", "data").
				Schedulable().PriorityClassName(prioLow).Obj(),
		} {
			p = create(t, client, p)
			bound[p.Name] = waitBound(t, client, p)
		}
	}
	mastersApart(t, client)

	t.Run("an equal-priority data pod preempts nothing", func(t *testing.T) {
		data := fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("logs-data-%d", nodes)).Elasticsearch("logs", "data").
			Schedulable().PriorityClassName(prioLow).Obj()
		staysPending(t, client, create(t, client, data))
	})

	t.Run("a higher-priority master preempts no master: the policy protects them", func(t *testing.T) {
		master := fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("cache-%d-master", nodes)).Redis("cache", "master", fmt.Sprint(nodes)).
			Schedulable().PriorityClassName(prioHigh).Obj()
		staysPending(t, client, create(t, client, master))
	})

	t.Run("a higher-priority data pod preempts the data pod on its node", func(t *testing.T) {
		p := create(t, client, fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("logs-data-%d", nodes+1)).Elasticsearch("logs", "data").
			Schedulable().PriorityClassName(prioHigh).Obj())
		node, victims := waitPreempted(t, client, p)
		if len(victims) != 1 || !strings.HasPrefix(victims[0], "logs-data-") {
			t.Fatalf("victims %v, want one data pod", victims)
		}
		if bound[victims[0]] != node {
			t.Errorf("%s bound to %s, but the victim was on %s", p.Name, node, bound[victims[0]])
		}
		mastersApart(t, client)
		t.Logf("%s bound to %s after preempting the data pod there", p.Name, node)
	})
}

// A high-priority pod that needs half a node's CPU (16 of 32), on a full
// node: default preemption, run by the plugin's PostFilter, evicts a
// lower-priority pod the policy does not protect and never a Redis master,
// though the master has the lowest priority there (stock default preemption
// would evict it, reprieving the pod of higher priority first). Where only
// the master could free the CPU, the pod stays pending and its
// FailedScheduling event says that regosched protects the pod that would
// have to go.
func TestPreemptionNeverEvictsAProtectedMaster(t *testing.T) {
	c := startCluster(t)
	client := c.Client()
	const prioMid = "plugin-mid"
	mid := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: prioMid}, Value: 1000}
	if _, err := client.SchedulingV1().PriorityClasses().Create(t.Context(), mid, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// half is p on node alone, asking for half its CPU.
	half := func(p *fixture.PodWrapper, node string) *corev1.Pod {
		pod := p.Namespace(ns).Schedulable().OnNodes(node).Obj()
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("16")
		return pod
	}
	fill := func(node string, pods ...*corev1.Pod) {
		t.Helper()
		for _, p := range pods {
			if got := waitBound(t, client, create(t, client, p)); got != node {
				t.Fatalf("%s bound to %s, want %s", p.Name, got, node)
			}
		}
	}

	t.Run("an unprotected pod is evicted, never the master", func(t *testing.T) {
		const node = "node-01"
		master := half(fixture.MakePod().Name("sessions-0-master").Redis("sessions", "master", "0").PriorityClassName(prioLow), node)
		fill(node, master, half(fixture.MakePod().Name("web-0").Label("app", "web").PriorityClassName(prioMid), node))
		p := create(t, client, half(fixture.MakePod().Name("batch-0").Label("app", "batch").PriorityClassName(prioHigh), node))
		_, victims := waitPreempted(t, client, p)
		if !slices.Equal(victims, []string{"web-0"}) {
			t.Errorf("victims %v, want web-0 alone", victims)
		}
		got, err := client.CoreV1().Pods(ns).Get(t.Context(), master.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("master %s: %v", master.Name, err)
		}
		if got.DeletionTimestamp != nil || got.Spec.NodeName != node {
			t.Errorf("master %s on %q, deletion %v: want it left on %s", master.Name, got.Spec.NodeName, got.DeletionTimestamp, node)
		}
	})

	t.Run("only the master could free the CPU: the pod stays pending, told why", func(t *testing.T) {
		const node = "node-02"
		fill(node, half(fixture.MakePod().Name("carts-0-master").Redis("carts", "master", "0").PriorityClassName(prioLow), node),
			half(fixture.MakePod().Name("web-1").Label("app", "web").PriorityClassName(prioHigh), node))
		p := create(t, client, half(fixture.MakePod().Name("batch-1").Label("app", "batch").PriorityClassName(prioHigh), node))
		const want = "regosched protects the pods preemption would have to evict (" + ns + "/carts-0-master on node " + node + ")"
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, waitLimit, true, func(context.Context) (bool, error) {
			return strings.Contains(failedScheduling(t, client, p), want), nil
		})
		if err != nil {
			t.Errorf("FailedScheduling of %s %q: %v; want it to say %q", p.Name, failedScheduling(t, client, p), err, want)
		}
		staysPending(t, client, p)
	})
}
