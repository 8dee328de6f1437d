//go:build e2e

package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
)

// testLogger sends logrus output to t.Log, so it shows next to the failure.
func testLogger(t *testing.T) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(tWriter{t})
	l.SetLevel(logrus.DebugLevel)
	return l
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestCluster(t *testing.T) {
	ctx := t.Context()
	log := testLogger(t)

	start := time.Now()
	bins, err := Build(ctx, BuildOptions{Log: log})
	if err != nil {
		t.Fatalf("Build() error = %v", err)
	}
	buildTook := time.Since(start)

	start = time.Now()
	c, err := Start(ctx, Config{Binaries: bins, Nodes: 3, Log: log})
	if err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	startTook := time.Since(start)
	t.Cleanup(c.Stop)
	// Registered after Stop, so it runs before it, while the logs exist.
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, c)
		}
	})
	t.Logf("build %s, start %s", buildTook.Round(time.Millisecond), startTook.Round(time.Millisecond))

	client := c.Client()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	var gotNodes []string
	for _, n := range nodes.Items {
		gotNodes = append(gotNodes, n.Name+"/"+n.Labels[LabelZone])
		if !nodeReady(&n) || n.Spec.Unschedulable || len(n.Spec.Taints) > 0 {
			t.Errorf("node %s is not ready and schedulable: unschedulable=%v taints=%v conditions=%v",
				n.Name, n.Spec.Unschedulable, n.Spec.Taints, n.Status.Conditions)
		}
		if pods := n.Status.Allocatable[corev1.ResourcePods]; pods.Value() != 110 {
			t.Errorf("node %s allocatable pods = %s, want 110", n.Name, pods.String())
		}
	}
	if want := "node-01/zone-a node-02/zone-b node-03/zone-c"; strings.Join(gotNodes, " ") != want {
		t.Errorf("nodes = %v, want %s", gotNodes, want)
	}

	out, err := c.Kubectl(ctx, "get", "nodes", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	if got := strings.Fields(string(out)); len(got) != 3 {
		t.Errorf("kubectl get nodes = %q, want 3 nodes", got)
	}

	sched, err := c.StartScheduler(ctx, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
`, c.KubeconfigPath())))
	if err != nil {
		t.Fatalf("StartScheduler() error = %v", err)
	}

	pod := fixture.MakePod().Name("pause").UID("").Container(corev1.Container{
		Name:  "pause",
		Image: fixture.PauseImage,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("64Mi"),
		}},
	}).Obj()
	if _, err := client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	start = time.Now()
	var nodeName string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-sched.Done():
			return false, sched.exitError()
		default:
		}
		p, err := client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		nodeName = p.Spec.NodeName
		return nodeName != "", nil
	})
	if err != nil {
		t.Fatalf("waiting for the pod to be bound: %v", err)
	}
	t.Logf("pod bound to %s after %s", nodeName, time.Since(start).Round(time.Millisecond))

	c.mu.Lock()
	procs := append([]*Process(nil), c.procs...)
	c.mu.Unlock()
	if len(procs) != 3 {
		t.Errorf("cluster tracks %d processes, want 3 (etcd, kube-apiserver, kube-scheduler)", len(procs))
	}
	dir := c.Dir()

	start = time.Now()
	c.Stop()
	c.Stop() // idempotent
	t.Logf("stop %s", time.Since(start).Round(time.Millisecond))

	for _, p := range procs {
		// Signal 0 checks for existence: both the process and its group
		// must be gone.
		for _, id := range []int{p.PID(), -p.PID()} {
			if err := signalZero(id); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("%s: kill(%d, 0) = %v, want ESRCH", p.Name, id, err)
			}
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster folder %s still exists (err = %v)", dir, err)
	}
	if _, err := c.StartProcess(ctx, "late", "/bin/true"); err == nil {
		t.Error("StartProcess() after Stop succeeded")
	}
}

func dumpLogs(t *testing.T, c *Cluster) {
	for _, name := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"} {
		data, err := os.ReadFile(c.Dir() + "/" + name + ".log")
		if err != nil {
			continue
		}
		t.Logf("--- end of %s.log ---\n%s", name, lastLines(string(data), 40))
	}
}

// startTestCluster builds the binaries (cached) and starts a cluster of n
// nodes for one test, stopped when it ends.
func startTestCluster(t *testing.T, n int) *Cluster {
	t.Helper()
	log := testLogger(t)
	bins, err := Build(t.Context(), BuildOptions{Log: log})
	if err != nil {
		t.Fatalf("Build() error = %v", err)
	}
	c, err := Start(t.Context(), Config{Binaries: bins, Nodes: n, Log: log})
	if err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}
