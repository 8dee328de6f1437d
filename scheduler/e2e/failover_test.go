//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ls "github.com/regosched/regosched/test/localstack"
)

// The plugin-mode failover burst, as test/e2e's for the extender: 160 pods
// on 8 nodes, the leader killed once 20 are bound.
const (
	failoverNodes     = 8
	failoverNS        = "failover"
	failoverKillAfter = 20
	failoverTakeover  = 30 * time.Second
	failoverBind      = 2 * time.Minute
)

// Two regosched-scheduler processes (kube-scheduler with regosched's
// plugin, the deployed plugin configuration) elect a leader through a
// Lease (4 s / 3 s / 1 s). A burst of pods with rules is created and the
// leader is killed with SIGKILL once some are bound: the standby takes the
// Lease and binds every pod, and no rule is broken. Each process judges
// with a placement cache of its own, fed by its own informers, so the
// standby's is warm when it takes over.
func TestPluginSchedulerFailoverMidBurst(t *testing.T) {
	ctx := t.Context()
	pc := startPluginCluster(t, failoverNodes)
	c, bin, cfg := pc.c, pc.bin, pc.cfg
	g, err := c.StartSchedulerGroup(ctx, bin, 2, cfg, ls.FailoverElection("regosched-scheduler-failover-e2e"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Stop()
		if t.Failed() {
			for _, p := range g.Processes {
				if b, err := os.ReadFile(p.LogPath); err == nil {
					t.Logf("--- end of %s ---\n%s", p.LogPath, tail(b, 4000))
				}
			}
		}
	})
	client := c.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: failoverNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var nodeNames []string
	for i := range failoverNodes {
		nodeNames = append(nodeNames, fmt.Sprintf("node-%02d", i+1))
	}

	res, err := ls.RunFailover(ctx, ls.Failover{
		Client:          client,
		Group:           g,
		Namespace:       failoverNS,
		Pods:            ls.FailoverPods(failoverNS, nodeNames, 8, 8, 48),
		KillAfter:       failoverKillAfter,
		TakeoverTimeout: failoverTakeover,
		BindTimeout:     failoverBind,
		Logf:            t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FAILOVER (plugin, Kubernetes API server %s): %s", c.Binaries().Kubernetes, res)
	if len(res.Violations) > 0 {
		t.Errorf("rules broken:\n%s", strings.Join(res.Violations, "\n"))
	}
}
