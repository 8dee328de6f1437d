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

	"github.com/regosched/regosched/test/fixture"
)

// runCmd runs regosched with args, as the binary would, and returns its
// exit code, standard output and standard error.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runWithInput(t, "", args...)
}

// runWithInput is runCmd with stdin as standard input.
func runWithInput(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestAuditErrors checks that what keeps `regosched audit` from auditing
// is an error (exit 2) or a usage error (64), never "violations" (exit 1).
func TestAuditErrors(t *testing.T) {
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
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{name: "unknown format", args: []string{"-o", "yaml"}, wantCode: exitUsage, want: `-o: unknown output format "yaml"`},
		{name: "arguments", args: []string{"pods"}, wantCode: exitUsage, want: "audit takes no arguments"},
		{name: "unknown flag", args: []string{"--nope"}, wantCode: exitUsage, want: "unknown flag: --nope"},
		{name: "bad duration", args: []string{"--timeout=soon"}, wantCode: exitUsage, want: `invalid argument "soon" for "--timeout" flag`},
		{name: "bad log level", args: []string{"--log-level=loud"}, wantCode: exitUsage, want: `--log-level: not a valid logrus Level: "loud"`},
		{name: "-n and -A", args: []string{"-n", "shop", "-A"}, wantCode: exitUsage, want: `--namespace "shop" and --all-namespaces: give one`},
		{name: "missing policy", args: []string{"--policy", filepath.Join(t.TempDir(), "none")}, wantCode: exitFailure, want: "reading policy bundle"},
		{name: "unknown context", args: []string{"--kubeconfig", kubeconfig, "--context", "nope"}, wantCode: exitFailure, want: `context "nope" does not exist`},
		{name: "unreachable API server", args: []string{"--kubeconfig", kubeconfig, "--timeout", "5s"}, wantCode: exitFailure, want: "listing nodes from the API server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, append([]string{"audit"}, tc.args...)...)
			if code != tc.wantCode || !strings.HasPrefix(stderr, "regosched: ") || !strings.Contains(stderr, tc.want) {
				t.Errorf("audit %q: exit %d, stderr %q; want exit %d and an error containing %q", tc.args, code, stderr, tc.wantCode, tc.want)
			}
			if stdout != "" {
				t.Errorf("audit %q wrote a report: %q", tc.args, stdout)
			}
		})
	}
}

// fakeAPIServer serves the lists and watches of nodes and pods that the
// placement cache makes, as an API server would (streaming the
// initial list to a watch that asks for it, which client-go's informers do
// by default); every watch then stays open and silent. It serves no
// StatefulSet, though it lists them: the cache waits for that list too,
// for the size of a quorum's group.
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
	kinds := map[string]string{"/api/v1/nodes": "Node", "/api/v1/pods": "Pod", "/apis/apps/v1/statefulsets": "StatefulSet"}
	apiVersion := func(path string) string {
		if strings.HasPrefix(path, "/apis/apps/v1/") {
			return "apps/v1"
		}
		return "v1"
	}
	// A pod's own path, for `regosched explain POD`.
	byPath := map[string]*corev1.Pod{}
	for i := range pods {
		byPath["/api/v1/namespaces/"+pods[i].Namespace+"/pods/"+pods[i].Name] = &pods[i]
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pod, ok := byPath[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(pod)
			return
		}
		kind, ok := kinds[r.URL.Path]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
				"reason": "NotFound", "code": http.StatusNotFound, "message": r.URL.Path + " not found"})
			return
		}
		objs := items[r.URL.Path]
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		q := r.URL.Query()
		if q.Get("watch") != "true" {
			_ = enc.Encode(map[string]any{"kind": kind + "List", "apiVersion": apiVersion(r.URL.Path), "metadata": map[string]any{"resourceVersion": "10"}, "items": objs})
			return
		}
		if q.Get("sendInitialEvents") == "true" {
			for _, o := range objs {
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": o})
			}
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"kind": kind, "apiVersion": apiVersion(r.URL.Path),
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
contexts:
- {name: x, context: {cluster: c, user: u}}
- {name: shop, context: {cluster: c, user: u, namespace: shop}}
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// TestAudit runs `regosched audit` against an API server: violations
// are reported (and make the command exit 1), their absence is not; -n
// keeps a namespace's.
func TestAudit(t *testing.T) {
	nodes := func() []corev1.Node {
		return []corev1.Node{*fixture.MakeNode().Name("node-1").Obj(), *fixture.MakeNode().Name("node-2").Obj()}
	}
	for _, tc := range []struct {
		name     string
		pods     []corev1.Pod
		args     []string
		wantCode int
		want     string
	}{
		{
			name: "violation, table",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("shop").Name("cache-0").ResourceVersion("5").Redis("cache", "master", "0").Node("node-1").Obj(),
				*fixture.MakePod().Namespace("shop").Name("cache-2").ResourceVersion("5").Redis("cache", "master", "1").Node("node-1").Obj(),
			},
			args:     []string{"-o", "table"},
			wantCode: exitViolations,
			want: `RULE           NAMESPACE  NODE    PODS             REASON
redis-masters  shop       node-1  cache-0,cache-2  redis: master shop/cache-2 of cluster cache already on this node
1 violation among 2 bound pods, policy revision `,
		},
		{
			name: "violation, json",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("shop").Name("cache-0").ResourceVersion("5").Redis("cache", "master", "0").Node("node-1").Obj(),
				*fixture.MakePod().Namespace("shop").Name("cache-1").ResourceVersion("5").Redis("cache", "replica", "0").Node("node-1").Obj(),
			},
			args:     []string{"--output=json"},
			wantCode: exitViolations,
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
			name: "no violation",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("shop").Name("cache-0").ResourceVersion("5").Redis("cache", "master", "0").Node("node-1").Obj(),
				*fixture.MakePod().Namespace("shop").Name("cache-1").ResourceVersion("5").Redis("cache", "replica", "0").Node("node-2").Obj(),
			},
			want: "0 violations among 2 bound pods, policy revision ",
		},
		{
			name: "another namespace",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("shop").Name("cache-0").ResourceVersion("5").Redis("cache", "master", "0").Node("node-1").Obj(),
				*fixture.MakePod().Namespace("shop").Name("cache-2").ResourceVersion("5").Redis("cache", "master", "1").Node("node-1").Obj(),
			},
			args: []string{"-n", "search"},
			want: "0 violations among 0 bound pods, policy revision ",
		},
		{
			name: "the namespace, and -A",
			pods: []corev1.Pod{
				*fixture.MakePod().Namespace("shop").Name("cache-0").ResourceVersion("5").Redis("cache", "master", "0").Node("node-1").Obj(),
				*fixture.MakePod().Namespace("shop").Name("cache-2").ResourceVersion("5").Redis("cache", "master", "1").Node("node-1").Obj(),
			},
			args:     []string{"--namespace=shop", "-A=false"},
			wantCode: exitViolations,
			want:     "RULE           NAMESPACE  NODE    PODS             REASON\nredis-masters  shop",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubeconfig := fakeAPIServer(t, nodes(), tc.pods)
			code, stdout, stderr := runCmd(t, append([]string{"audit", "--kubeconfig", kubeconfig, "--timeout", "20s"}, tc.args...)...)
			if code != tc.wantCode {
				t.Errorf("audit exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr)
			}
			if !strings.HasPrefix(stdout, tc.want) {
				t.Errorf("audit wrote:\n%s\nwant it to start with:\n%s", stdout, tc.want)
			}
			// Violations are no error line, and progress is off when
			// standard error is no terminal (the log may warn).
			if strings.Contains(stderr, "regosched: ") || strings.Contains(stderr, "regosched audit: ") {
				t.Errorf("audit wrote an error or progress to standard error:\n%s", stderr)
			}
		})
	}
}
