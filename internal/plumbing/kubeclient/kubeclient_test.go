package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestClientAsksForProtobuf: regosched's client asks the API server for
// protobuf (JSON only as a fallback), which is much cheaper to decode for
// the watch events of every pod in the cluster.
func TestClientAsksForProtobuf(t *testing.T) {
	accept := make(chan string, 1)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case accept <- r.Header.Get("Accept"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer api.Close()
	kubeconfig := writeKubeconfig(t, api.URL)

	cfg, err := Config(Target{Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	cfg = Fast(cfg, 50, 100)
	if cfg.QPS != 50 || cfg.Burst != 100 {
		t.Errorf("QPS, Burst = %v, %v, want 50, 100", cfg.QPS, cfg.Burst)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A server that answers JSON still works: the fallback.
	if _, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("listing pods from a server that answers JSON: %v", err)
	}
	got := <-accept
	if !strings.HasPrefix(got, "application/vnd.kubernetes.protobuf") || !strings.Contains(got, "application/json") {
		t.Errorf("Accept = %q, want protobuf first, JSON as a fallback", got)
	}
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigOrder: serve, explain and audit find the cluster in one order:
// the flag, $KUBECONFIG, in-cluster (then ~/.kube/config, which clientcmd
// reads from the home directory at start, out of a test's reach).
func TestConfigOrder(t *testing.T) {
	flag := writeKubeconfig(t, "https://flag.example:6443")
	env := writeKubeconfig(t, "https://env.example:6443")
	tests := []struct {
		name, path, env string
		inCluster       bool
		want            string // host, or "" for an error
	}{
		{name: "the flag wins", path: flag, env: env, inCluster: true, want: "https://flag.example:6443"},
		{name: "then $KUBECONFIG", env: env, inCluster: true, want: "https://env.example:6443"},
		{name: "then in-cluster, whose token is missing here", inCluster: true, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			host, port := "", ""
			if tt.inCluster {
				host, port = "10.0.0.1", "443"
			}
			t.Setenv("KUBERNETES_SERVICE_HOST", host)
			t.Setenv("KUBERNETES_SERVICE_PORT", port)
			cfg, err := Config(Target{Kubeconfig: tt.path})
			if tt.want == "" {
				if err == nil {
					t.Fatalf("Config() = %s, want the in-cluster error", cfg.Host)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tt.want {
				t.Errorf("Config().Host = %q, want %q", cfg.Host, tt.want)
			}
		})
	}
}

// TestContext: --context picks a context of the kubeconfig, as kubectl's
// does, for the server and for the namespace a command uses without -n.
func TestContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users: [{name: u, user: {token: t}}]
contexts:
- {name: a, context: {cluster: a, user: u, namespace: shop}}
- {name: b, context: {cluster: b, user: u}}
current-context: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, context    string
		wantHost, wantNS string
		wantErr          string
	}{
		{name: "the current context", wantHost: "https://a.example:6443", wantNS: "shop"},
		{name: "another context", context: "b", wantHost: "https://b.example:6443", wantNS: "default"},
		{name: "an unknown context", context: "nope", wantErr: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := Target{Kubeconfig: path, Context: tt.context}
			cfg, err := Config(target)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Config(%+v) error = %v, want one containing %q", target, err, tt.wantErr)
				}
				if _, err := Namespace(target); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Namespace(%+v) error = %v, want one containing %q", target, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ns, err := Namespace(target)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tt.wantHost, tt.wantNS}, []string{cfg.Host, ns}); diff != "" {
				t.Errorf("host, namespace (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("contexts, for completion", func(t *testing.T) {
		got, err := Contexts(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
			t.Errorf("Contexts() (-want +got):\n%s", diff)
		}
	})
}

// TestContextSkipsInCluster: a context names a kubeconfig entry, so a
// command given --context in a pod reads the kubeconfig, not the pod's
// service account.
func TestContextSkipsInCluster(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	tests := []struct {
		name          string
		target        Target
		wantInCluster bool
	}{
		// The token is missing here: the in-cluster attempt is an error.
		{name: "no flags", target: Target{}, wantInCluster: true},
		{name: "--context", target: Target{Context: "b"}},
		{name: "--kubeconfig", target: Target{Kubeconfig: "/nonexistent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.target.inCluster()
			tried := err != nil || cfg != nil
			if tried != tt.wantInCluster {
				t.Errorf("inCluster(%+v) = %v, %v; want tried %v", tt.target, cfg, err, tt.wantInCluster)
			}
		})
	}
}
