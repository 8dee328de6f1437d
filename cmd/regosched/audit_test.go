package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// TestAuditToErrors checks that what keeps `regosched audit` from auditing
// is an error (exit 2), never "violations" (exit 1).
func TestAuditToErrors(t *testing.T) {
	// A kubeconfig of a server nobody listens on: the port is reserved.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "unknown format", args: []string{"-o", "yaml"}, want: `-o: unknown output format "yaml"`},
		{name: "arguments", args: []string{"pods"}, want: "audit takes no arguments"},
		{name: "unknown flag", args: []string{"--nope"}, want: "flag provided but not defined"},
		{name: "missing policy", args: []string{"--policy", filepath.Join(t.TempDir(), "none")}, want: "reading policy bundle"},
		{name: "unreachable API server", args: []string{"--kubeconfig", kubeconfig, "--timeout", "5s"}, want: "listing nodes from the API server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			violations, err := auditTo(tc.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("auditTo(%q) error = %v, want one containing %q", tc.args, err, tc.want)
			}
			if violations {
				t.Errorf("auditTo(%q) reported violations", tc.args)
			}
			if stdout.Len() > 0 {
				t.Errorf("auditTo(%q) wrote a report: %q", tc.args, stdout.String())
			}
		})
	}
}

// fakeAPIServer serves the lists and watches of nodes and pods that the
// placement cache makes, as an API server would (streaming the
// initial list to a watch that asks for it, which client-go's informers do
// by default); every watch then stays open and silent.
func fakeAPIServer(t *testing.T, nodes []corev1.Node, pods []corev1.Pod) string {
	t.Helper()
	items := map[string][]runtime.Object{}
	for i := range nodes {
		nodes[i].TypeMeta = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}
		items["/api/v1/nodes"] = append(items["/api/v1/nodes"], &nodes[i])
	}
	for i := range pods {
		pods[i].TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
		items["/api/v1/pods"] = append(items["/api/v1/pods"], &pods[i])
	}
	kinds := map[string]string{"/api/v1/nodes": "Node", "/api/v1/pods": "Pod"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, ok := kinds[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		objs := items[r.URL.Path]
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		q := r.URL.Query()
		if q.Get("watch") != "true" {
			_ = enc.Encode(map[string]any{"kind": kind + "List", "apiVersion": "v1", "metadata": map[string]any{"resourceVersion": "10"}, "items": objs})
			return
		}
		if q.Get("sendInitialEvents") == "true" {
			for _, o := range objs {
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": o})
			}
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"kind": kind, "apiVersion": "v1",
				"metadata": map[string]any{"resourceVersion": "10", "annotations": map[string]string{"k8s.io/initial-events-end": "true"}}}})
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func redisPod(name, node, role, shard string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "5", Labels: map[string]string{
			"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache",
			"app.kubernetes.io/component": role, "regosched.io/shard": shard,
		}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// TestAuditTo runs `regosched audit` against an API server: violations
// are reported (and make the command exit 1), their absence is not.
func TestAuditTo(t *testing.T) {
	nodes := func() []corev1.Node {
		return []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}}
	}
	for _, tc := range []struct {
		name           string
		pods           []corev1.Pod
		format         string
		wantViolations bool
		want           string
	}{
		{
			name:   "violation, table",
			pods:   []corev1.Pod{redisPod("cache-0", "node-1", "master", "0"), redisPod("cache-2", "node-1", "master", "1")},
			format: "table", wantViolations: true,
			want: `RULE           NAMESPACE  NODE    PODS             REASON
redis-masters  shop       node-1  cache-0,cache-2  redis: master shop/cache-2 of cluster cache already on this node
1 violation among 2 bound pods, policy revision `,
		},
		{
			name:   "violation, json",
			pods:   []corev1.Pod{redisPod("cache-0", "node-1", "master", "0"), redisPod("cache-1", "node-1", "replica", "0")},
			format: "json", wantViolations: true,
			want: `{
  "violations": [
    {
      "rule": "redis-master-replica",
      "namespace": "shop",
      "node": "node-1",
      "pods": [
        "shop/cache-0",
        "shop/cache-1"
      ],
      "reason": "redis: replica shop/cache-1 of cluster cache (shard 0) already on this node"
    }
  ],
  "policyRevision": `,
		},
		{
			name:   "no violation",
			pods:   []corev1.Pod{redisPod("cache-0", "node-1", "master", "0"), redisPod("cache-1", "node-2", "replica", "0")},
			format: "table",
			want:   "0 violations among 2 bound pods, policy revision ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubeconfig := fakeAPIServer(t, nodes(), tc.pods)
			var stdout, stderr bytes.Buffer
			violations, err := auditTo([]string{"--kubeconfig", kubeconfig, "-o", tc.format, "--timeout", "20s"}, &stdout, &stderr)
			if err != nil {
				t.Fatalf("auditTo() error = %v; log:\n%s", err, stderr.String())
			}
			if violations != tc.wantViolations {
				t.Errorf("auditTo() violations = %v, want %v", violations, tc.wantViolations)
			}
			if got := stdout.String(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("auditTo() wrote:\n%s\nwant it to start with:\n%s", got, tc.want)
			}
		})
	}
}
