package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/ops/explain"
	"github.com/regosched/regosched/test/fixture"
)

// TestExplain runs `regosched explain` against an API server, for a
// manifest and for a pod of the cluster, in the namespace -n, --context
// or the manifest gives.
func TestExplain(t *testing.T) {
	nodes := []corev1.Node{*fixture.MakeNode().Name("node-1").Obj(), *fixture.MakeNode().Name("node-2").Obj()}
	kubeconfig := fakeAPIServer(t, nodes, []corev1.Pod{
		*fixture.MakePod().Namespace("shop").Name("cache-0").ResourceVersion("5").Redis("cache", "master", "0").Node("node-1").Obj(),
		*fixture.MakePod().Namespace("shop").Name("cache-1").ResourceVersion("5").Redis("cache", "replica", "0").Node("node-2").Obj(),
	})
	dir := t.TempDir()
	manifest := func(name, namespace string) string {
		path := filepath.Join(dir, name+".yaml")
		doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n"
		if namespace != "" {
			doc += "  namespace: " + namespace + "\n"
		}
		doc += "  labels: {app.kubernetes.io/name: redis, app.kubernetes.io/instance: cache, app.kubernetes.io/component: replica, regosched.io/shard: \"0\"}\n"
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bare, inCache := manifest("new", ""), manifest("cached", "cache")
	for _, tc := range []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		// wantPod and wantBoundTo are the report's, when the code is 0;
		// wantErr is in the error line otherwise.
		wantPod, wantBoundTo, wantErr string
	}{
		{name: "a pod of the cluster, -n", args: []string{"-n", "shop", "cache-1"}, wantPod: "shop/cache-1", wantBoundTo: "node-2"},
		{name: "a pod of the cluster, the context's namespace", args: []string{"--context", "shop", "cache-0"}, wantPod: "shop/cache-0", wantBoundTo: "node-1"},
		{name: "a pod not in the default namespace", args: []string{"cache-1"}, wantCode: exitFailure, wantErr: "reading pod default/cache-1"},
		{name: "a manifest without a namespace", args: []string{"-f", bare}, wantPod: "default/new"},
		{name: "a manifest without a namespace, -n", args: []string{"-f", bare, "-n", "shop"}, wantPod: "shop/new"},
		{name: "a manifest without a namespace, the context's", args: []string{"--filename", bare, "--context", "shop"}, wantPod: "shop/new"},
		{name: "a manifest's namespace wins over the context's", args: []string{"-f", inCache, "--context", "shop"}, wantPod: "cache/cached"},
		{name: "a manifest on standard input", args: []string{"-f", "-", "-n", "shop"}, wantPod: "shop/stdin",
			stdin: "apiVersion: v1\nkind: Pod\nmetadata: {name: stdin}\n"},
		{name: "-n against the manifest's", args: []string{"-f", inCache, "-n", "shop"}, wantCode: exitUsage,
			wantErr: `--namespace "shop" disagrees with the namespace of ` + inCache + `, "cache"`},
		{name: "no pod", wantCode: exitUsage, wantErr: "explain: -f FILE or POD is required"},
		{name: "both", args: []string{"-f", bare, "cache-1"}, wantCode: exitUsage, wantErr: "give -f FILE or POD, not both"},
		{name: "two pods", args: []string{"cache-0", "cache-1"}, wantCode: exitUsage, wantErr: `explain takes one pod, got ["cache-0" "cache-1"]`},
		{name: "unknown format", args: []string{"-o", "yaml", "cache-1"}, wantCode: exitUsage, wantErr: `-o: unknown output format "yaml"`},
		{name: "a manifest that is no pod", args: []string{"-f", "-"}, stdin: "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n",
			wantCode: exitFailure, wantErr: "want a v1 Pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"explain", "--kubeconfig", kubeconfig, "--timeout", "20s", "-o", "json"}, tc.args...)
			code, stdout, stderr := runWithInput(t, tc.stdin, args...)
			if code != tc.wantCode {
				t.Fatalf("explain %q: exit %d, want %d; stderr:\n%s", tc.args, code, tc.wantCode, stderr)
			}
			if tc.wantCode != exitOK {
				if !strings.HasPrefix(stderr, "regosched: ") || !strings.Contains(stderr, tc.wantErr) {
					t.Errorf("explain %q: stderr %q, want an error line containing %q", tc.args, stderr, tc.wantErr)
				}
				return
			}
			var report explain.Report
			if err := json.Unmarshal([]byte(stdout), &report); err != nil {
				t.Fatalf("explain %q: %v in\n%s", tc.args, err, stdout)
			}
			if diff := cmp.Diff([]string{tc.wantPod, tc.wantBoundTo}, []string{report.Pod, report.BoundTo}); diff != "" {
				t.Errorf("explain %q: pod, boundTo (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}
