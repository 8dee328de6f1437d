//go:build e2e

package localcluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
)

// acquiredLine is what client-go's leader election logs (at any -v) when
// the process takes the Lease.
const acquiredLine = "Successfully acquired lease"

// TestSchedulerGroupFailover runs two stock kube-schedulers with leader
// election: Holder names the process whose log says it took the Lease, the
// other takes over once the leader is killed, and then binds a pod.
func TestSchedulerGroupFailover(t *testing.T) {
	ctx := t.Context()
	c := startTestCluster(t, 2)
	le := LeaderElection{ResourceNamespace: "kube-system", ResourceName: "group-e2e",
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second}
	cfg := fmt.Appendf(nil, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+
		"clientConnection:\n  kubeconfig: %s\nprofiles:\n- schedulerName: default-scheduler\n", c.KubeconfigPath())
	g, err := c.StartSchedulerGroup(ctx, c.Binaries().KubeScheduler, 2, cfg, le)
	if err != nil {
		t.Fatalf("StartSchedulerGroup() error = %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range g.Processes {
				t.Logf("--- end of %s ---\n%s", p.LogPath, p.LogTail(30))
			}
		}
	})

	first, err := g.WaitHolder(ctx, 30*time.Second, func(h LeaseHolder) bool { return h.Process != nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader: %s", first)
	for _, p := range g.Processes {
		if got, want := logSays(t, p, acquiredLine), p == first.Process; got != want {
			t.Errorf("%s's log says %q: %v, want %v (Holder named %s)", p.Name, acquiredLine, got, want, first.Manager)
		}
	}

	killed := time.Now()
	first.Process.Kill()
	next, err := g.WaitHolder(ctx, 30*time.Second, func(h LeaseHolder) bool {
		return h.Process != nil && h.Process != first.Process
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after SIGKILL of %s, %s took the Lease %s later (transitions %d)",
		first.Manager, next, next.AcquireTime.Sub(killed).Round(time.Millisecond), next.Transitions)
	if !logSays(t, next.Process, acquiredLine) {
		t.Errorf("%s holds the Lease, but its log does not say %q", next.Manager, acquiredLine)
	}

	pod := fixture.MakePod().Name("after-failover").UID("").Container(corev1.Container{Name: "pause", Image: fixture.PauseImage}).Obj()
	pods := c.Client().CoreV1().Pods(metav1.NamespaceDefault)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", err
	})
	if err != nil {
		t.Fatalf("pod not bound by the new leader: %v", err)
	}
}

// logSays reports whether p's log contains s.
func logSays(t *testing.T, p *Process, s string) bool {
	t.Helper()
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), s)
}
