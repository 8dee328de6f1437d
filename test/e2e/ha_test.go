//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// takeoverTimeout bounds a standby's take-over after the leader died
// without releasing its Lease: the Lease lasts 15 s from its last renewal
// (every 2 s), which a standby, trying every 2 to 4.4 s (client-go's
// jitter factor 1.2), counts from when it saw it.
const takeoverTimeout = 30 * time.Second

// handoverTimeout bounds a take-over after the leader released its Lease on
// SIGTERM: the standby's next try (within 4.4 s) finds it free, far sooner
// than the 15 s a lapse takes.
const handoverTimeout = 8 * time.Second

// Two replicas of deploy/ha's extender as real processes, in pods the test
// creates on two nodes and reports Ready as each process's /readyz says,
// behind deploy/ha's Service, whose EndpointSlices the real
// kube-controller-manager computes:
//   - both replicas are Ready; one answers the verbs, the other 503 "not the
//     leader"; only the leader's pod carries regosched.io/leader=true, and
//     the Service's endpoints are that pod alone;
//   - SIGKILL of the leader: the standby takes over once the Lease lapses,
//     and the label and the endpoints move to its pod;
//   - a process restarted for the old pod removes a stale label from it and
//     stays a Ready standby;
//   - SIGTERM of the leader: it releases the Lease on its way out and the
//     other replica takes over at once.
func TestLeaderElectionBothReadyLabelFollowsLeader(t *testing.T) {
	const ns = "e2e-ha-failover"
	ctx := setup(t, ns)
	if _, err := stack.ControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	m := renderHA(t, ctx, ns)
	svc := m.Service.Name
	if _, err := stack.Client().CoreV1().Services(ns).Create(ctx, m.Service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteQuietly(t, "Service "+svc, func(ctx context.Context) error {
		return stack.Client().CoreV1().Services(ns).Delete(ctx, svc, metav1.DeleteOptions{})
	})

	k := newHAKubelet(t, ns, fmt.Sprintf("regosched-e2e-%d", time.Now().UnixNano()))
	k.podPorts = true
	for i, node := range nodes(t, ctx, 2) {
		pod, err := podFromTemplate(m.Deployment, fmt.Sprintf("regosched-%d", i), node)
		if err != nil {
			t.Fatal(err)
		}
		if pod, err = stack.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := k.start(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	k.run(ctx)

	settled := func(s haState) bool {
		return len(s.ready) == 2 && len(s.apiReady) == 2 && len(s.leaders) == 1 && len(s.refusing) == 1 &&
			slices.Equal(s.labelled, s.leaders) && slices.Equal(s.endpoints, s.leaders)
	}
	st := k.waitState(ctx, "both replicas Ready, one leading, its pod alone labelled and behind the Service", svc, takeoverTimeout, settled)
	lead, standby := st.leaders[0], st.refusing[0]
	for range 5 {
		time.Sleep(400 * time.Millisecond)
		s, err := k.state(ctx, svc)
		if err != nil || !settled(s) || s.leaders[0] != lead {
			t.Fatalf("not settled on %s as the leader a moment later: %s (%v)", lead, s, err)
		}
	}
	// The Service's endpoint is the leader's process (on loopback, see
	// haKubelet): a filter sent to its port is answered.
	addr := net.JoinHostPort("127.0.0.1", st.ports[lead])
	if code, body, err := call(ctx, nil, http.MethodPost, "http://"+addr+"/scheduler/filter"); err != nil || code != http.StatusOK {
		t.Errorf("filter at the Service's endpoint port %s = %d %s (%v), want 200", addr, code, body, err)
	}

	// SIGKILL: no Lease release, no label removal.
	killed := time.Now()
	if err := k.proc(lead).r.Kill(); err != nil {
		t.Fatal(err)
	}
	if s, err := k.state(ctx, svc); err != nil || len(s.leaders) != 0 || !one(s.labelled, lead) || !one(s.refusing, standby) {
		t.Errorf("right after the leader's death: %s (%v); want no leader yet, %s still labelled, %s refusing", s, err, lead, standby)
	}
	var tLead, tLabel, tEndpoints time.Duration
	k.waitState(ctx, "the standby leading, its pod alone labelled and behind the Service", svc, takeoverTimeout, func(s haState) bool {
		since := time.Since(killed)
		for _, m := range []struct {
			first *time.Duration
			l     []string
		}{{&tLead, s.leaders}, {&tLabel, s.labelled}, {&tEndpoints, s.endpoints}} {
			if *m.first == 0 && one(m.l, standby) {
				*m.first = since
			}
		}
		return one(s.leaders, standby) && one(s.labelled, standby) && one(s.endpoints, standby)
	})
	t.Logf("failover after SIGKILL of the leader: the standby answers the verbs after %s, the label moved after %s, the EndpointSlice after %s",
		tLead.Round(time.Millisecond), tLabel.Round(time.Millisecond), tEndpoints.Round(time.Millisecond))

	// The new leader removed the dead one's label as it took over. A label
	// can outlive its leader all the same (that clean-up failed, or the old
	// pod's container restarted before any take-over): put it back, then
	// restart a process for the old pod, which removes it before campaigning.
	yes := "true"
	if err := setLabel(ctx, ns, lead, &yes); err != nil {
		t.Fatal(err)
	}
	oldPod, err := stack.Client().CoreV1().Pods(ns).Get(ctx, lead, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.start(ctx, oldPod); err != nil {
		t.Fatal(err)
	}
	k.waitState(ctx, "the restarted process Ready as a standby and its pod's stale label gone", svc, takeoverTimeout, func(s haState) bool {
		return len(s.ready) == 2 && len(s.apiReady) == 2 && one(s.leaders, standby) && one(s.refusing, lead) &&
			one(s.labelled, standby) && one(s.endpoints, standby)
	})

	// SIGTERM: the leader drains, drops its label and releases the Lease.
	holder, err := leaseHolder(ctx, ns, k.lease)
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	leaving := k.proc(standby).r
	leaving.Stop()
	exited := time.Since(stopped)
	if err := leaving.Err(); err != nil {
		t.Errorf("the leader exited with %v on SIGTERM, want status 0; end of its log:\n%s", err, leaving.LogTail(15))
	}
	after, err := leaseHolder(ctx, ns, k.lease)
	if err != nil {
		t.Fatal(err)
	}
	if after == holder {
		t.Errorf("Lease %s still held by %s once the leader exited on SIGTERM: not released", k.lease, holder)
	}
	// It took its label along: no pod is labelled until the other leads
	// (its next try for the Lease comes up to 4.4 s later).
	if s, err := k.state(ctx, ""); err != nil || len(s.labelled) != 0 && !one(s.labelled, lead) {
		t.Errorf("once the leader exited on SIGTERM: %s (%v); want no pod labelled, or %s if it already leads", s, err, lead)
	}
	var handover time.Duration
	k.waitState(ctx, "the other replica leading, its pod alone labelled and behind the Service", svc, handoverTimeout, func(s haState) bool {
		if one(s.leaders, lead) && one(s.labelled, lead) && one(s.endpoints, lead) {
			handover = time.Since(stopped)
			return true
		}
		return false
	})
	t.Logf("handover after SIGTERM of the leader: it exited after %s (Lease holder then %q), the other replica led, labelled and behind the Service %s after the signal",
		exited.Round(time.Millisecond), after, handover.Round(time.Millisecond))
}

// podFromTemplate returns a pod of d's template named name, bound to node,
// whose container ports (http, health) are ports free on loopback now, for
// its process to serve on.
func podFromTemplate(d *appsv1.Deployment, name, node string) (*corev1.Pod, error) {
	tmpl := d.Spec.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace, pod.Spec.NodeName = name, d.Namespace, node
	ports := pod.Spec.Containers[0].Ports
	for i := range ports {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		_, p, _ := net.SplitHostPort(a)
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		ports[i].ContainerPort = int32(n)
	}
	return pod, nil
}
