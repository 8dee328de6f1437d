package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg, err := clientConfig(kubeconfig, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
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
