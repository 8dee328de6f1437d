package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/plumbing/leader"
)

const haNamespace = "regosched-system"

// haCluster is a fake API holding one node, one pending pod of the profile
// and the replicas' own pods.
func haCluster() *fake.Clientset {
	replica := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: haNamespace, Name: name}, Spec: v1.PodSpec{NodeName: "node-1"}}
	}
	return fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web"}, Spec: v1.PodSpec{SchedulerName: "regosched"}},
		replica("regosched-a"), replica("regosched-b"),
	)
}

// replica runs one regosched replica over client until ctx ends.
func replica(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, done chan<- error) (verbs, health string) {
	t.Helper()
	verbs, health = freeAddr(t), freeAddr(t)
	log, _ := logtest.NewNullLogger()
	opts := Options{
		Listen: verbs, HealthListen: health, Client: client, Policy: bundles.Config{Default: regosched.DefaultPolicy()},
		URLPrefix: "/scheduler", Version: "test", Verbs: true, SchedulerName: "regosched", LeaderElect: true, Log: log,
	}
	opts.Leader = leader.Config{Namespace: haNamespace, Name: "regosched", Identity: name,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		PodNamespace: haNamespace, PodName: name}
	go func() { done <- Run(ctx, opts) }()
	return "http://" + verbs, "http://" + health
}

func holder(t *testing.T, client *fake.Clientset) string {
	t.Helper()
	lease, err := client.CoordinationV1().Leases(haNamespace).Get(context.Background(), "regosched", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

func post(url, body string) (int, string) { return send(http.MethodPost, url, body) }

// send makes one request to a loopback test URL: its status and body, or
// 0 and the error.
func send(method, url, body string) (int, string) {
	req, err := http.NewRequest(method, url, strings.NewReader(body)) //nolint:noctx // loopback test URL
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req) //nolint:gosec // loopback test URL
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestStandbyIsReadyButRefusesTheVerbs: both replicas are Ready (so a
// rollout and a drain proceed); the standby refuses the verbs and only the
// leader's pod carries the label the Service selects.
func TestStandbyIsReadyButRefusesTheVerbs(t *testing.T) {
	client := haCluster()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	verbsA, healthA := replica(ctx, t, client, "regosched-a", doneA)
	until(t, "a to lead", func() bool {
		p, err := client.CoreV1().Pods(haNamespace).Get(context.Background(), "regosched-a", metav1.GetOptions{})
		return err == nil && holder(t, client) == "regosched-a" && p.Labels[leader.Label] == "true"
	})
	verbsB, healthB := replica(ctx, t, client, "regosched-b", doneB)

	until(t, "both replicas ready", func() bool { return get(healthA+"/readyz") == http.StatusOK && get(healthB+"/readyz") == http.StatusOK })
	filter := `{"Pod":{"metadata":{"name":"web","namespace":"shop","uid":"uid-web"},"spec":{"schedulerName":"regosched"}},"NodeNames":["node-1"]}`
	if status, body := post(verbsA+"/scheduler/filter", filter); status != http.StatusOK {
		t.Errorf("leader's filter = %d %s, want 200", status, body)
	}
	if status, body := post(verbsB+"/scheduler/filter", filter); status != http.StatusServiceUnavailable || !strings.Contains(body, "not the leader") {
		t.Errorf("standby's filter = %d %s, want 503 saying it is not the leader", status, body)
	}
	until(t, "the leader label on a alone", func() bool {
		pods, err := client.CoreV1().Pods(haNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: leader.Label + "=true"})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Name == "regosched-a"
	})
	cancel()
	for _, done := range []chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Errorf("Run() = %v after cancel", err)
		}
	}
}

// TestShutdownDrainsBindsBeforeReleasingTheLease: a bind under way when the
// leader is told to stop finishes before the Lease is released, so no other
// replica decides against a placement still being made.
func TestShutdownDrainsBindsBeforeReleasingTheLease(t *testing.T) {
	client := haCluster()
	entered, release := make(chan struct{}), make(chan struct{})
	var binds atomic.Int32
	slow := slowBinds{Interface: client, bind: func() {
		if binds.Add(1) == 1 {
			close(entered)
		}
		<-release
	}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	verbs, health := replica(ctx, t, slow, "regosched-a", done)
	// Leading once its pod is labelled: the lease record alone comes a
	// moment before the elector says it leads.
	until(t, "the replica to lead", func() bool {
		p, err := client.CoreV1().Pods(haNamespace).Get(context.Background(), "regosched-a", metav1.GetOptions{})
		return err == nil && holder(t, client) == "regosched-a" && p.Labels[leader.Label] == "true"
	})
	until(t, "the replica to be ready", func() bool {
		return holder(t, client) == "regosched-a" && get(health+"/readyz") == http.StatusOK
	})

	type answer struct {
		status int
		body   string
	}
	bound := make(chan answer, 1)
	go func() {
		s, b := post(verbs+"/scheduler/bind", `{"PodName":"web","PodNamespace":"shop","PodUID":"uid-web","Node":"node-1"}`)
		bound <- answer{s, b}
	}()
	select {
	case <-entered:
	case a := <-bound:
		t.Fatalf("bind answered %d %s before reaching the API binding", a.status, a.body)
	}
	cancel() // SIGTERM while the binding is under way
	time.Sleep(500 * time.Millisecond)
	if got := holder(t, client); got != "regosched-a" {
		t.Errorf("lease holder while a bind is in flight = %q, want regosched-a (released too early)", got)
	}
	close(release)
	if a := <-bound; a.status != http.StatusOK || strings.Contains(a.body, `"Error":"`) && !strings.Contains(a.body, `"Error":""`) {
		t.Errorf("bind in flight at shutdown = %d %s, want it answered", a.status, a.body)
	}
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run() = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run() did not return after the drain")
	}
	if got := holder(t, client); got != "" {
		t.Errorf("lease holder after shutdown = %q, want released", got)
	}
}

// slowBinds holds each pod binding in bind before it reaches the API. The
// fake clientset runs its reactors under one lock, so a reactor that blocks
// would stall the lease renewals too.
type slowBinds struct {
	kubernetes.Interface
	bind func()
}

func (s slowBinds) CoreV1() corev1client.CoreV1Interface {
	return slowCore{CoreV1Interface: s.Interface.CoreV1(), bind: s.bind}
}

type slowCore struct {
	corev1client.CoreV1Interface
	bind func()
}

func (c slowCore) Pods(namespace string) corev1client.PodInterface {
	return slowPods{PodInterface: c.CoreV1Interface.Pods(namespace), bind: c.bind}
}

type slowPods struct {
	corev1client.PodInterface
	bind func()
}

func (p slowPods) Bind(ctx context.Context, b *v1.Binding, opts metav1.CreateOptions) error {
	p.bind()
	return p.PodInterface.Bind(ctx, b, opts)
}

// IsWatchListSemanticsUnSupported passes on what the fake clientset tells
// the informers: it cannot stream a watch list.
func (s slowBinds) IsWatchListSemanticsUnSupported() bool { return true }
