package redisroles

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localredis/fakeredis"
)

// genericRedis labels a pod of the default policy's generic Redis workload,
// whose roles regosched reads live.
var genericRedis = map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache"}

// listenerPod is a running pod of the default policy's generic Redis
// workload in ns whose container port named redis is a listener on
// 127.0.0.1.
func listenerPod(ns, name string, port int, env ...corev1.EnvVar) *corev1.Pod {
	return fixture.MakePod().Namespace(ns).Name(name).UID(name+"-uid").Labels(genericRedis).StatefulSet("cache", "sts").
		Container(corev1.Container{Name: "redis", Env: env, Ports: []corev1.ContainerPort{{Name: "redis", ContainerPort: int32(port)}}}).
		Phase(corev1.PodRunning).PodIP("127.0.0.1").Obj()
}

// runController starts a controller over client with cfg (interval 100 ms
// unless cfg sets one) until the test ends; it returns the controller and
// the registry of its metrics.
func runController(t *testing.T, client kubernetes.Interface, cfg Config) (*Controller, *prometheus.Registry) {
	t.Helper()
	pol := defaultPolicy(t)
	reg := prometheus.NewRegistry()
	cfg.Client, cfg.Policy, cfg.Registerer = client, func() *policy.Policy { return pol }, reg
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	cfg.Log = log
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
	return c, reg
}

func createPods(t *testing.T, client kubernetes.Interface, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A pod whose Redis answers INFO with a header claiming 1 TiB (and ROLE
// with 2^32 elements) costs the controller a protocol error, not its
// process; its labels stay as they were.
func TestHostileRedisPod(t *testing.T) {
	hostile, err := fakeredis.Start(fakeredis.HostileAnswer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hostile.Close)
	client := fake.NewClientset()
	pod := listenerPod("tenant", "cache-0", hostile.Port())
	pod.Labels["regosched.io/role"] = "replica"
	createPods(t, client, pod)

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	c, _ := runController(t, client, Config{})
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return testutil.ToFloat64(c.errorsTotal.WithLabelValues(ReasonProtocol)) >= 2, nil
	})
	if err != nil {
		t.Fatalf("protocol errors counted: %v, want >= 2", testutil.ToFloat64(c.errorsTotal.WithLabelValues(ReasonProtocol)))
	}
	runtime.ReadMemStats(&ms)
	t.Logf("allocated %d KiB in all while the hostile pod was asked", (ms.TotalAlloc-before)>>10)
	got, err := client.CoreV1().Pods("tenant").Get(t.Context(), "cache-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pod.Labels, got.Labels); diff != "" {
		t.Errorf("labels changed (-want +got):\n%s", diff)
	}
	if n := testutil.ToFloat64(c.changesTotal); n != 0 {
		t.Errorf("regosched_redis_role_changes_total = %v, want 0", n)
	}
}

// The shared password goes only to the namespaces listed for it; a pod
// elsewhere is asked with its own REDIS_PASSWORD, or none.
func TestSharedPasswordStaysInItsNamespaces(t *testing.T) {
	const shared = "shared-s3cret"
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte(shared+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listeners := map[string]*fakeredis.Server{}
	for _, name := range []string{"listed", "evil-bare", "evil-own"} {
		f, err := fakeredis.Start(fakeredis.MasterAnswer)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		listeners[name] = f
	}
	client := fake.NewClientset()
	createPods(t, client,
		listenerPod("shop", "listed", listeners["listed"].Port()),
		listenerPod("evil", "evil-bare", listeners["evil-bare"].Port()),
		listenerPod("evil", "evil-own", listeners["evil-own"].Port(), corev1.EnvVar{Name: "REDIS_PASSWORD", Value: "own"}))
	runController(t, client, Config{PasswordFile: file, PasswordNamespaces: []string{"shop"}, PasswordInsecure: true})
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Labels["regosched.io/role"] != Master {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal("not every pod was labelled master")
	}
	// The password of each AUTH (or HELLO ... AUTH user password) sent.
	passwords := func(f *fakeredis.Server) []string {
		var out []string
		for _, cmd := range f.Commands() {
			switch {
			case strings.EqualFold(cmd[0], "AUTH"):
				out = append(out, cmd[len(cmd)-1])
			case strings.EqualFold(cmd[0], "HELLO"):
				if i := slices.IndexFunc(cmd, func(s string) bool { return strings.EqualFold(s, "AUTH") }); i >= 0 && i+2 < len(cmd) {
					out = append(out, cmd[i+2])
				}
			}
			if slices.Contains(cmd, shared) && !strings.EqualFold(cmd[0], "AUTH") && !strings.EqualFold(cmd[0], "HELLO") {
				out = append(out, shared)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	got := map[string][]string{}
	for name, f := range listeners {
		got[name] = passwords(f)
	}
	want := map[string][]string{"listed": {shared}, "evil-bare": nil, "evil-own": {"own"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("passwords received (-want +got):\n%s", diff)
	}
}

func TestNewRefusesAnUnboundSharedPassword(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // in the error; "" for none
	}{
		{"no namespaces", Config{PasswordFile: "f", PasswordInsecure: true}, "--redis-password-namespaces"},
		{"no TLS", Config{PasswordFile: "f", PasswordNamespaces: []string{"shop"}}, "TLS"},
		{"TLS without verification", Config{PasswordFile: "f", PasswordNamespaces: []string{"shop"}, TLS: &tls.Config{InsecureSkipVerify: true}}, "verif"},
		{"verified TLS", Config{PasswordFile: "f", PasswordNamespaces: []string{"shop"}, TLS: &tls.Config{MinVersion: tls.VersionTLS12}}, ""},
		{"insecure by choice", Config{PasswordFile: "f", PasswordNamespaces: []string{"shop"}, PasswordInsecure: true}, ""},
		{"no shared password", Config{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Client, tt.cfg.Registerer, tt.cfg.Log = fake.NewClientset(), prometheus.NewRegistry(), logrus.New()
			tt.cfg.Policy = func() *policy.Policy { return nil }
			_, err := New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New() = %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New() = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
