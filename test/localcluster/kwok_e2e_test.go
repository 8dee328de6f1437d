//go:build e2e

package localcluster

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
)

// TestKwok shows what the harness relies on kwok for, with the real
// processes: on the nodes it manages, a pod runs (Ready, an IP of its
// node's podCIDR, hostIP the node's, never the same) and a deletion or an
// eviction completes at once; the cluster's other nodes and their pods are
// left as they are.
func TestKwok(t *testing.T) {
	ctx := t.Context()
	c := startTestCluster(t, 1)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, c)
		}
	})
	start := time.Now()
	k, err := c.Kwok(ctx)
	if err != nil {
		t.Fatalf("Kwok() error = %v", err)
	}
	if again, err := c.Kwok(ctx); err != nil || again != k {
		t.Errorf("a second Kwok() = %p, %v; want the running %p", again, err, k)
	}
	if err := k.AddNodes(ctx, []string{"kwok-1"}, []string{"zone-a"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("kwok built, started and its node ready after %s", time.Since(start).Round(time.Millisecond))

	client := c.Client()
	kwokNodeObj, err := client.CoreV1().Nodes().Get(ctx, "kwok-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, cidr, err := net.ParseCIDR(kwokNodeObj.Spec.PodCIDR)
	if err != nil {
		t.Fatalf("node kwok-1's podCIDR %q: %v", kwokNodeObj.Spec.PodCIDR, err)
	}
	pods := client.CoreV1().Pods(metav1.NamespaceDefault)
	bound := func(name, node string) {
		t.Helper()
		p := fixture.MakePod().Namespace(metav1.NamespaceDefault).Name(name).Schedulable().Node(node).Obj()
		p.Spec.Tolerations = []corev1.Toleration{KwokToleration()}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound("plain", "node-01")
	bound("a", "kwok-1")
	bound("b", "kwok-1")
	var ips []string
	for _, name := range []string{"a", "b"} {
		var p *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err = pods.Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning && podReady(p), nil
		})
		if err != nil {
			t.Fatalf("pod %s on kwok's node never ran: %+v", name, p.Status)
		}
		ip := net.ParseIP(p.Status.PodIP)
		if !cidr.Contains(ip) || !ip.IsLoopback() || p.Status.HostIP != k.NodeIP || p.Status.PodIP == p.Status.HostIP {
			t.Errorf("pod %s: IP %s, hostIP %s; want a loopback IP of %s, and hostIP %s", name, p.Status.PodIP, p.Status.HostIP, cidr, k.NodeIP)
		}
		ips = append(ips, p.Status.PodIP)
	}
	if ips[0] == ips[1] {
		t.Errorf("both pods got IP %s", ips[0])
	}
	t.Logf("pods on kwok's node %s (podCIDR %s, InternalIP %s) run at %v", kwokNodeObj.Name, cidr, k.NodeIP, ips)
	plain, err := pods.Get(ctx, "plain", metav1.GetOptions{})
	if err != nil || plain.Status.Phase != corev1.PodPending || plain.Status.PodIP != "" {
		t.Errorf("the pod on node-01, not kwok's: %v, %+v; want it pending, untouched", err, plain.Status)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "node-01", metav1.GetOptions{})
	if err != nil || len(node.Status.Addresses) != 0 {
		t.Errorf("node-01, not kwok's: %v, addresses %v; want none", err, node.Status.Addresses)
	}

	// A graceful deletion and an eviction end with the pod gone, as a
	// kubelet's confirmation would.
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("pod %s is still there a minute after its deletion", name)
		}
	}
	if err := k.DeleteNodes(ctx, "kwok-1"); err != nil {
		t.Error(err)
	}
}
