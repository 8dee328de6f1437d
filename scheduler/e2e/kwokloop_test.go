//go:build e2e

package e2e

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/test/localcluster"
	ls "github.com/regosched/regosched/test/localstack"
)

// The whole eviction loop in the plugin build (test/e2e's
// TestKwokEvictionLoop for the extender): regosched-scheduler places, and
// `regosched serve --verbs=false` beside it reads Redis roles, audits and
// repairs. A Redis master and its own replica of one StatefulSet stand on
// the zone-a node of two kwok nodes; the companion evicts the replica
// through the Eviction API under the set's PodDisruptionBudget, the
// statefulset-controller recreates it, and the plugin places it.
//
// The plugin judges a recreated pod by its labels alone (it has no
// recall, docs/scheduler-plugin.md): the pod comes back without role
// labels, and is the replica of shard slot-0 to the plugin only if the
// companion has written its remembered role before the scheduler takes
// it, which is a race. Unlabelled, it is a pod of unknown role, which
// Bitnami's redis-cluster preset keeps off every node holding a pod of
// its cluster (redis-unknown-apart) but not out of its master's zone. The
// zone-a node holds its master and the zone-b node nothing, so either way
// it lands on the zone-b node, and one eviction does it, as in the
// extender. (Had there been an empty node in zone-a, an unlabelled replica
// could land there, and the companion would then find it in its master's
// zone and evict it again.)
func TestPluginKwokEvictionLoop(t *testing.T) {
	const loopNS = "kwok-loop"
	ctx := t.Context()
	pc := startPluginCluster(t, 0)
	c := pc.c
	root, err := localcluster.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	regosched := filepath.Join(t.TempDir(), "regosched")
	if err := ls.BuildRegosched(ctx, root, regosched); err != nil {
		t.Fatal(err)
	}
	sched, err := c.StartSchedulerBinary(ctx, pc.bin, pc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Its own cluster: the statefulset-controller can run with the others.
	kcm, err := c.StartControllerManager(ctx, slices.Concat(ls.Controllers, ls.StatefulSetControllers)...)
	if err != nil {
		t.Fatal(err)
	}
	kwok, err := c.Kwok(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := c.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: loopNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var companion *localcluster.Process
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*localcluster.Process{sched, kcm, kwok.Process, companion} {
				if p != nil {
					t.Logf("--- end of %s ---\n%s", p.LogPath, p.LogTail(60))
				}
			}
		}
		if companion != nil {
			companion.Stop()
		}
	})
	res, err := ls.RunEvictionLoop(ctx, ls.EvictionLoop{
		Client: client, Kwok: kwok, Namespace: loopNS, Dir: t.TempDir(),
		Regosched: regosched, Kubeconfig: c.KubeconfigPath(),
		StartRepair: func(ctx context.Context, _ ls.EvictionScene) (string, error) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return "", err
			}
			listen := l.Addr().String()
			_ = l.Close()
			companion, err = c.StartProcess(ctx, "regosched-companion", regosched, "serve", "--verbs=false",
				"--listen", listen, "--kubeconfig", c.KubeconfigPath(), "--log-level", "debug",
				"--redis-roles", "--redis-roles-interval=1s", "--audit-interval=2s",
				"--repair=on", "--repair-cooldown=1s", "--repair-max-per-hour=100", "--repair-timeout=1m",
				"--leader-elect-namespace="+loopNS, "--redis-roles-configmap=", "--repair-configmap=kwok-repair")
			if err != nil {
				return "", err
			}
			return "http://" + listen, nil
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("KWOK EVICTION LOOP (plugin): %s", res)
	for _, p := range res.Problems() {
		t.Error(p)
	}
	if want := "replica/slot-0 (remembered)"; res.BoundRole != want && res.BoundRole != "/ ()" {
		t.Errorf("the recreated replica was bound with role labels %q, want none or %q", res.BoundRole, want)
	}
	t.Logf("the recreated replica was bound %s", strconv.Quote(res.BoundRole))
}
