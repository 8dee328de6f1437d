//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/ops/explain"
	"github.com/regosched/regosched/test/fixture"
)

// `regosched explain`, the binary, against the real API server: the Redis
// master and replica of shard 0 and the replica of shard 2 placed by the
// real scheduler, then the master of shard 2 (not created) explained from
// a YAML file. Its verdicts are those the extender gives (master 0's node
// and the replica's zone refused with the rules' reasons), its scores
// prefer the nodes without a member, and a kubeconfig pointing nowhere
// fails fast with the cause.
func TestExplainCommand(t *testing.T) {
	const ns = "e2e-explain"
	ctx := setup(t, ns)
	three := nodes(t, ctx, 3) // zones a, b, c
	// Two masters in all (no quorum to keep: a group of two has no
	// majority to lose), another shard's replica, and shard 2's replica.
	m0 := place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Schedulable().OnNodes(three[0]).Obj())
	r0 := place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Schedulable().OnNodes(three[1]).Obj())
	r2 := place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-2-replica").Redis("cache", "replica", "2").Schedulable().OnNodes(three[2]).Obj())
	if err := stack.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "regosched")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/regosched")
	build.Dir = stack.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pod := fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Schedulable().Obj()
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	manifest, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	podFile := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(podFile, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := stack.Cluster().KubeconfigPath()
	run := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"explain"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	table, stderr, err := run("-f", podFile, "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatalf("regosched explain: %v\n%s", err, stderr)
	}
	t.Logf("regosched explain -f pod.yaml:\n%s", table)
	for _, want := range []string{
		"Pod:       " + ns + "/cache-2-master\n",
		"Policy:    embedded default policy, revision ",
		"Peer keys: redis/" + ns + "/cache\n",
		ns + "/cache-2-replica on " + r2 + "\n",
		"Nodes:     8: 5 ok, 0 failed, 3 unresolvable\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}

	out, stderr, err := run("-f", podFile, "--kubeconfig", kubeconfig, "-o", "json")
	if err != nil {
		t.Fatalf("regosched explain -o json: %v\n%s", err, stderr)
	}
	var report explain.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("JSON output does not parse: %v\n%s", err, out)
	}
	zoneOf := map[string]string{}
	nodeList, err := stack.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodeList.Items {
		zoneOf[n.Name] = n.Labels["topology.kubernetes.io/zone"]
	}
	masters := explain.Denial{Rule: "redis-masters", Peer: ns + "/cache-0-master", Reason: "redis: master " + ns + "/cache-0-master of cluster cache already on this node"}
	replica := explain.Denial{Rule: "redis-master-replica", Peer: ns + "/cache-2-replica", Reason: "redis: replica " + ns + "/cache-2-replica of cluster cache (shard 2) already on this node"}
	replicaZone := explain.Denial{Rule: "redis-master-replica-zones", Peer: ns + "/cache-2-replica",
		Reason: "redis: replica " + ns + "/cache-2-replica of cluster cache (shard 2) already in zone " + zoneOf[r2]}
	got := map[string]explain.NodeResult{}
	for _, n := range report.Nodes {
		got[n.Node] = n
	}
	want := map[string]explain.NodeResult{}
	for name, zone := range zoneOf {
		// Equal priorities: preemption cannot help.
		switch {
		case name == m0:
			want[name] = explain.NodeResult{Node: name, Verdict: explain.Unresolvable, Reason: masters.Reason, Denials: []explain.Denial{masters}}
		case name == r2:
			want[name] = explain.NodeResult{Node: name, Verdict: explain.Unresolvable, Reason: replicaZone.Reason + "; " + replica.Reason,
				Denials: []explain.Denial{replica, replicaZone}}
		case zone == zoneOf[r2]:
			// The replica of its shard is in this zone: the master goes elsewhere.
			want[name] = explain.NodeResult{Node: name, Verdict: explain.Unresolvable, Reason: replicaZone.Reason, Denials: []explain.Denial{replicaZone}}
		default:
			// Another member of cache on r0's node: spread over nodes.
			score := int64(10)
			if name == r0 {
				score = 0
			}
			want[name] = explain.NodeResult{Node: name, Verdict: explain.OK, Score: &score}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("explained nodes mismatch (-want +got):\n%s", diff)
	}
	if !report.Scored {
		t.Error("report.Scored = false, want the node spread to score")
	}

	// An API server that is not there: a prompt, clear error.
	dead := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(dead, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, stderr, err = run("-f", podFile, "--kubeconfig", dead, "--timeout", "10s")
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("explain against no API server: %v, want a non-zero exit", err)
	}
	for _, want := range []string{"listing nodes from the API server", "connection refused"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("failing took %s, want well under the 10s timeout", took)
	}
}
