//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	ls "github.com/regosched/regosched/test/localstack"
)

// The failover burst: 8 Redis clusters (4 shards, a master and a replica
// each), 8 Elasticsearch clusters of 6 data pods and 48 plain pods, 160 pods
// on the stack's 8 nodes; the leader is killed once failoverKillAfter are
// bound, well before a scheduler on this machine has bound them all.
const (
	failoverRedis     = 8
	failoverES        = 8
	failoverPlain     = 48
	failoverKillAfter = 20
	failoverLease     = "regosched-failover-e2e"
	// failoverTakeover bounds each wait for a leader: the Lease lapses 4 s
	// after its last renewal, and the standby tries every 1 to 2.2 s.
	failoverTakeover = 30 * time.Second
)

// Two stock kube-schedulers for the regosched profile, each calling
// regosched's extender as the deployed configuration does, elect a leader
// through a Lease (4 s / 3 s / 1 s). A burst of pods with rules is created
// and the leader is killed with SIGKILL (no Lease release) once some are
// bound: the standby takes the Lease, binds every pod, and no rule is
// broken, by the stack's independent check nor by `regosched audit`.
// The take-over time is logged: from the kill to the standby's Lease and to
// its first binding.
func TestSchedulerFailoverMidBurst(t *testing.T) {
	const ns = "e2e-failover"
	ctx := setup(t, ns)
	if v := stack.Variant(); v.NoBindVerb || !slices.Equal(v.ExtenderArgs, deployedArgs) {
		t.Fatalf("shared stack runs %s, want the deployed configuration", v)
	}
	cfg, err := stack.SchedulerConfig()
	if err != nil {
		t.Fatal(err)
	}
	// The stack's own scheduler (no leader election) would compete with
	// the group for every pod; it comes back when the test ends, after the
	// group has stopped (clean-ups run last registered first).
	stack.StopScheduler()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := stack.StartScheduler(ctx); err != nil {
			t.Errorf("restarting the stack's kube-scheduler: %v", err)
		}
	})
	c := stack.Cluster()
	// A Lease of this run's own: with -count=N, a holder left by an earlier
	// run would be read as this run's process of the same name.
	lease := fmt.Sprintf("%s-%d", failoverLease, time.Now().UnixNano())
	g, err := c.StartSchedulerGroup(ctx, c.Binaries().KubeScheduler, 2, cfg, ls.FailoverElection(lease))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range g.Processes {
				t.Logf("--- end of %s ---\n%s", p.LogPath, p.LogTail(40))
			}
		}
	})

	pods := ls.FailoverPods(ns, nodes(t, ctx, stackNodes), failoverRedis, failoverES, failoverPlain)
	res, err := ls.RunFailover(ctx, ls.Failover{
		Client:          stack.Client(),
		Group:           g,
		Namespace:       ns,
		Pods:            pods,
		KillAfter:       failoverKillAfter,
		TakeoverTimeout: failoverTakeover,
		BindTimeout:     burstTimeout,
		Logf:            t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FAILOVER (extender, Kubernetes %s): %s", c.Binaries().Kubernetes, res)
	if len(res.Violations) > 0 {
		t.Errorf("rules broken:\n%s", strings.Join(res.Violations, "\n"))
	}
	noViolations(t, ctx, ns)
	if v := auditViolations(t, ctx, ns); len(v) > 0 {
		t.Errorf("regosched audit finds rules broken in %s:\n%s", ns, strings.Join(v, "\n"))
	}
}

// auditViolations runs `regosched audit -o json` (internal/ops/audit, with the
// embedded policy) and returns the violations it reports in namespace ns,
// one line each.
func auditViolations(t *testing.T, ctx context.Context, ns string) []string {
	t.Helper()
	cmd := exec.CommandContext(ctx, stack.Binary(), "audit", "-o", "json", "--kubeconfig", stack.Cluster().KubeconfigPath())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	// Exit 1 means violations, maybe in other namespaces: read on.
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		t.Fatalf("regosched audit: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var report struct {
		Violations []struct {
			Rule      string   `json:"rule"`
			Namespace string   `json:"namespace"`
			Node      string   `json:"node"`
			Pods      []string `json:"pods"`
		} `json:"violations"`
		Pods int `json:"pods"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("regosched audit -o json: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var v []string
	for _, x := range report.Violations {
		if x.Namespace == ns {
			v = append(v, x.Rule+" on "+x.Node+": "+strings.Join(x.Pods, ", "))
		}
	}
	t.Logf("regosched audit: %d grouped pods checked, %d violations in %s", report.Pods, len(v), ns)
	return v
}
