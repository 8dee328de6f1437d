package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// snapshotDir holds the snapshots of testdata/snapshots, as kubectl prints
// them.
const snapshotDir = "../../testdata/snapshots/"

// The reports of the snapshots under testdata/snapshots: cluster.yaml has
// no violation, violating.yaml puts a Redis master and its replica on
// node-a, and so in its zone eu-west-1a too (redis-master-replica-zones).
// The finished and the pending Elasticsearch data pods are no peers: they
// occupy no node.
const (
	auditClean     = "0 violations among 6 bound pods, policy revision default-1\n"
	auditViolating = `RULE                        NAMESPACE  NODE    PODS                                         REASON
redis-master-replica        shop       node-a  cache-redis-master-0,cache-redis-replicas-0  redis: replica shop/cache-redis-replicas-0 of cluster cache already on this node
redis-master-replica-zones  shop       node-a  cache-redis-master-0,cache-redis-replicas-0  redis: replica shop/cache-redis-replicas-0 of cluster cache already in zone eu-west-1a
2 violations among 6 bound pods, policy revision default-1
`
	explainPending = `Pod:       search/logs-elasticsearch-data-2
Policy:    embedded default policy, revision default-1
Peer keys: bitnami-elasticsearch/search/logs
           elasticsearch/search/logs
Peers:     search/logs-elasticsearch-data-0 on node-b
           search/logs-elasticsearch-data-1 on node-c
           search/logs-elasticsearch-master-0 on node-a
Nodes:     3: 1 ok, 0 failed, 2 unresolvable
Scores:    no preference among the nodes that pass: every one scores 0

NODE    VERDICT       SCORE  REASON
node-b  unresolvable  -      elasticsearch: data search/logs-elasticsearch-data-0 of cluster logs already on this node
node-c  unresolvable  -      elasticsearch: data search/logs-elasticsearch-data-1 of cluster logs already on this node
node-a  ok            0
`
	explainManifest = `Pod:       search/logs-elasticsearch-data-9
Policy:    embedded default policy, revision default-1
Peer keys: elasticsearch/search/logs
Peers:     search/logs-elasticsearch-data-0 on node-b
           search/logs-elasticsearch-data-1 on node-c
           search/logs-elasticsearch-master-0 on node-a
Nodes:     3: 1 ok, 0 failed, 2 unresolvable
Scores:    no preference among the nodes that pass: every one scores 0

NODE    VERDICT       SCORE  REASON
node-b  unresolvable  -      elasticsearch: data search/logs-elasticsearch-data-0 of cluster logs already on this node
node-c  unresolvable  -      elasticsearch: data search/logs-elasticsearch-data-1 of cluster logs already on this node
node-a  ok            0
`
)

// noKubeconfig points HOME and KUBECONFIG at an empty directory, so that
// reading any kubeconfig fails: --snapshot must read none.
func noKubeconfig(t *testing.T) []string {
	t.Helper()
	empty := t.TempDir()
	t.Setenv("HOME", empty)
	t.Setenv("KUBECONFIG", empty)
	return []string{"HOME=" + empty, "KUBECONFIG=" + empty}
}

// snapshotCase is one run of audit or explain --snapshot.
type snapshotCase struct {
	name       string
	args       []string
	wantCode   int
	wantStdout string
	// wantErr starts standard error, the error line for a failure;
	// otherwise standard error holds at most the audit's warning logs.
	wantErr string
}

// snapshotCases are the runs that both the in-process test and the
// binary's check.
func snapshotCases() []snapshotCase {
	return []snapshotCase{
		{name: "audit clean", args: []string{"audit", "--snapshot", snapshotDir + "cluster.yaml"}, wantStdout: auditClean},
		{name: "audit clean JSON snapshot", args: []string{"audit", "--snapshot", snapshotDir + "cluster.json"}, wantStdout: auditClean},
		{name: "audit clean YAML stream", args: []string{"audit", "--snapshot", snapshotDir + "stream.yaml"}, wantStdout: auditClean},
		{name: "audit violation", args: []string{"audit", "--snapshot", snapshotDir + "violating.yaml"}, wantCode: exitViolations, wantStdout: auditViolating},
		// --plan reads the pods from the snapshot too, and asks no Redis.
		{name: "audit violation plan", args: []string{"audit", "--snapshot", snapshotDir + "violating.yaml", "--plan"}, wantCode: exitViolations,
			wantStdout: auditViolating + `
REPAIR  RULE                        PODS                                                   TARGET  WHY
none    redis-master-replica        shop/cache-redis-master-0,shop/cache-redis-replicas-0  -       the role of shop/cache-redis-master-0 is unknown (label regosched.io/role=""): regosched acts on known roles only
none    redis-master-replica-zones  shop/cache-redis-master-0,shop/cache-redis-replicas-0  -       the role of shop/cache-redis-master-0 is unknown (label regosched.io/role=""): regosched acts on known roles only
`},
		{name: "audit violation elsewhere", args: []string{"audit", "--snapshot", snapshotDir + "violating.yaml", "-n", "search"},
			wantStdout: "0 violations among 3 bound pods, policy revision default-1\n"},
		{name: "explain pending pod", args: []string{"explain", "--snapshot", snapshotDir + "cluster.yaml", "-n", "search", "logs-elasticsearch-data-2"},
			wantStdout: explainPending},
		{name: "explain manifest", args: []string{"explain", "--snapshot", snapshotDir + "cluster.yaml", "-f", snapshotDir + "new-elasticsearch-data.yaml"},
			wantStdout: explainManifest},
		{name: "explain pod not in snapshot", args: []string{"explain", "--snapshot", snapshotDir + "cluster.yaml", "logs-elasticsearch-data-2"},
			wantCode: exitFailure, wantErr: `regosched: reading pod default/logs-elasticsearch-data-2: pods "logs-elasticsearch-data-2" not found` + "\n"},
		{name: "audit missing snapshot", args: []string{"audit", "--snapshot", snapshotDir + "none.yaml"},
			wantCode: exitFailure, wantErr: "regosched: snapshot: open " + snapshotDir + "none.yaml: no such file or directory\n"},
		{name: "audit --snapshot and --kubeconfig", args: []string{"audit", "--snapshot", snapshotDir + "cluster.yaml", "--kubeconfig", "k"},
			wantCode: exitUsage, wantErr: "regosched: --snapshot and --kubeconfig: give one\nRun 'regosched audit --help' for usage.\n"},
		{name: "explain --snapshot and --context", args: []string{"explain", "--snapshot", snapshotDir + "cluster.yaml", "--context", "c", "x"},
			wantCode: exitUsage, wantErr: "regosched: --snapshot and --context: give one\nRun 'regosched explain --help' for usage.\n"},
	}
}

// check compares a run's results with the case's.
func (tc snapshotCase) check(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if code != tc.wantCode {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr)
	}
	if diff := cmp.Diff(tc.wantStdout, stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if tc.wantErr != "" {
		if diff := cmp.Diff(tc.wantErr, stderr); diff != "" {
			t.Errorf("stderr (-want +got):\n%s", diff)
		}
		return
	}
	for line := range strings.Lines(stderr) {
		if !strings.Contains(line, "level=warning msg=\"placement violates a hard rule\"") {
			t.Errorf("stderr has more than the audit's warnings: %q", line)
		}
	}
}

func TestSnapshot(t *testing.T) {
	noKubeconfig(t)
	for _, tc := range snapshotCases() {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tc.args...)
			tc.check(t, code, stdout, stderr)
		})
	}
}

// TestSnapshotBinary runs the built binary with no kubeconfig to read.
func TestSnapshotBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "regosched")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := noKubeconfig(t)
	for _, tc := range snapshotCases() {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := exec.CommandContext(t.Context(), bin, tc.args...)
			// Only the empty HOME and KUBECONFIG, and PATH: nothing else of
			// the environment may point at a cluster.
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
			cmd.Stdout, cmd.Stderr = &out, &errOut
			code := 0
			if err := cmd.Run(); err != nil {
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					t.Fatalf("running %s: %v", bin, err)
				}
				code = exit.ExitCode()
			}
			tc.check(t, code, out.String(), errOut.String())
		})
	}
}
