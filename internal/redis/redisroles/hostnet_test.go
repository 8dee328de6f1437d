package redisroles

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/localredis/fakeredis"
)

// countingListener is a TCP listener on 127.0.0.1 that counts the
// connections it accepts and closes them at once.
func countingListener(t *testing.T) (port int, accepted *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return l.Addr().(*net.TCPAddr).Port, accepted
}

// A pod that shares its node's network (hostNetwork, or an IP that is its
// node's) is neither probed nor dialed for the repair: its IP and port may
// be another team's Redis on that node. Its role labels are cleared and
// it is labelled why; a pod of its own network is still asked.
func TestHostNetworkPodsAreNeverDialed(t *testing.T) {
	normal, err := fakeredis.Start(fakeredis.MasterAnswer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(normal.Close)
	tests := []struct {
		name   string
		hostIP bool // the node's address: hostNetwork, or podIP == hostIP
		pod    func(port int) *corev1.Pod
	}{
		{"hostNetwork", true, func(port int) *corev1.Pod {
			p := listenerPod("tenant", "host-network", port)
			p.Spec.HostNetwork = true
			return p
		}},
		{"podIP is hostIP", true, func(port int) *corev1.Pod {
			p := listenerPod("tenant", "host-ip", port)
			p.Status.HostIP = "127.0.0.1"
			return p
		}},
		{"podIP is one of hostIPs", true, func(port int) *corev1.Pod {
			p := listenerPod("tenant", "host-ips", port)
			p.Status.HostIP = "::1"
			p.Status.HostIPs = []corev1.HostIP{{IP: "::1"}, {IP: "127.0.0.1"}}
			return p
		}},
		{"own network", false, func(int) *corev1.Pod {
			p := listenerPod("tenant", "own", normal.Port())
			p.Status.HostIP = "10.0.0.1"
			return p
		}},
	}
	accepted := map[string]*atomic.Int64{}
	pods := map[string]*corev1.Pod{}
	client := fake.NewClientset()
	for _, tt := range tests {
		port, n := countingListener(t)
		p := tt.pod(port)
		// As if read before the fix from another Redis on the node.
		p.Labels["regosched.io/role"] = Master
		p.Annotations = map[string]string{SourceAnnotation: "redis"}
		accepted[tt.name], pods[tt.name] = n, p
		createPods(t, client, p)
	}
	c, _ := runController(t, client, Config{})
	refused := func() float64 { return testutil.ToFloat64(c.errorsTotal.WithLabelValues(ReasonHostNetwork)) }
	dialed := func() (n int64) {
		for _, a := range accepted {
			n += a.Load()
		}
		return n
	}
	// Each host-networked pod checked at least twice (100 ms, then 200 ms),
	// or one dialed: the subtests say which.
	_ = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return (refused() >= 6 || dialed() > 0) && len(normal.Commands()) > 0, nil
	})
	if len(normal.Commands()) == 0 {
		t.Error("the own-network pod was never asked")
	}
	if refused() < 6 {
		t.Errorf("regosched_redis_role_errors_total{reason=host_network} = %v, want >= 6", refused())
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pods[tt.name]
			var dialErr error
			err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				rc, err := c.Dial(ctx, p.Namespace, p.Name, p.UID)
				dialErr = err
				if err != nil {
					return !errors.Is(err, ErrNotReadable), nil
				}
				defer func() { _ = rc.Close() }()
				dialErr = rc.Ping(ctx).Err()
				return true, nil
			})
			if err != nil {
				t.Fatalf("Dial() = %v", dialErr)
			}
			if got := errors.Is(dialErr, ErrHostNetwork); got != tt.hostIP {
				t.Errorf("Dial() = %v, want ErrHostNetwork: %v", dialErr, tt.hostIP)
			}
			if !tt.hostIP && dialErr != nil {
				t.Errorf("Dial() then PING = %v, want nil", dialErr)
			}
			if n := accepted[tt.name].Load(); n != 0 {
				t.Errorf("the node's listener accepted %d connections, want 0", n)
			}
			got, err := client.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"role": Master, "unreadable": "", "source": "redis"}
			if tt.hostIP {
				want = map[string]string{"role": "", "unreadable": policy.HostNetwork, "source": ""}
			}
			// The marking patch may land a moment after the metric counts.
			_ = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
				got, err = client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
				return err == nil && got.Labels[policy.UnreadableLabel] == want["unreadable"], nil
			})
			have := map[string]string{"role": got.Labels["regosched.io/role"], "unreadable": got.Labels[policy.UnreadableLabel], "source": got.Annotations[SourceAnnotation]}
			if diff := cmp.Diff(want, have); diff != "" {
				t.Errorf("pod labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostNetworked(t *testing.T) {
	tests := []struct {
		name   string
		pod    corev1.Pod
		want   bool
		reason string // of client()'s error; "" for none
	}{
		{"own network", corev1.Pod{Status: corev1.PodStatus{PodIP: "10.1.0.5", HostIP: "10.0.0.1"}}, false, ""},
		{"not yet scheduled", corev1.Pod{Status: corev1.PodStatus{PodIP: ""}}, false, ""},
		{"hostNetwork", corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}, Status: corev1.PodStatus{PodIP: "10.0.0.1", HostIP: "10.0.0.1"}}, true, ReasonHostNetwork},
		{"hostNetwork, no IP yet", corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}, true, ReasonHostNetwork},
		{"podIP is hostIP", corev1.Pod{Status: corev1.PodStatus{PodIP: "10.0.0.1", HostIP: "10.0.0.1"}}, true, ReasonHostNetwork},
		{"podIP is a hostIP, IPv6 spelled otherwise", corev1.Pod{Status: corev1.PodStatus{PodIP: "fd00::1", HostIP: "10.0.0.1",
			HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}, {IP: "fd00:0:0::1"}}}}, true, ReasonHostNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.pod.Namespace, tt.pod.Name, tt.pod.UID = "tenant", "cache-0", types.UID("u")
			stripped, err := stripPod(&tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			info := infoOf(stripped.(*corev1.Pod))
			if got := hostNetworked(info); got != tt.want {
				t.Errorf("hostNetworked() = %v, want %v", got, tt.want)
			}
			var why string
			if err := ownNetwork(info); err != nil {
				why = reason(err)
			}
			if diff := cmp.Diff(tt.reason, why); diff != "" {
				t.Errorf("reason(ownNetwork()) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A pending pod is given its remembered role until Redis answers, unless
// it shares its node's network: then its role is never guessed.
func TestRecallSkipsHostNetwork(t *testing.T) {
	tests := []struct {
		name        string
		hostNetwork bool
		want        string // role label after recall
	}{
		{"own network", false, Master},
		{"host network", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := listenerPod("shop", "cache-1", 6379)
			pod.Status.Phase, pod.Status.PodIP = corev1.PodPending, ""
			pod.Spec.HostNetwork = tt.hostNetwork
			client := fake.NewClientset(pod)
			pol := defaultPolicy(t)
			c, err := New(Config{Client: client, Policy: func() *policy.Policy { return pol }, Registerer: prometheus.NewRegistry(), Log: logrus.New()})
			if err != nil {
				t.Fatal(err)
			}
			c.memory.set("shop", "cache-1", remembered{Role: Master, Owner: "sts", Seen: time.Now()})
			labels, _ := pol.LiveLabels()
			stripped, err := stripPod(pod)
			if err != nil {
				t.Fatal(err)
			}
			c.recall(t.Context(), infoOf(stripped.(*corev1.Pod)), labels, logrus.New())
			got, err := client.CoreV1().Pods("shop").Get(t.Context(), "cache-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Labels[labels.Role]); diff != "" {
				t.Errorf("role label (-want +got):\n%s", diff)
			}
		})
	}
}
