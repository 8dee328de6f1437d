//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/localcluster"
	"github.com/regosched/regosched/test/localredis"
	ls "github.com/regosched/regosched/test/localstack"
)

// A real Redis Cluster of 3 shards, a master per zone and each replica
// out of its master's zone; a real failover of shard B promotes its
// replica in zone-a, beside master A: 2 of the 3 masters in one zone, the
// quorum lost with zone-a though no node holds two masters. A regosched
// with --repair=on hands one of those shards to an in-sync replica in
// another zone with a graceful CLUSTER FAILOVER, and no key is lost.
func TestRepairQuorumPerZoneAfterFailover(t *testing.T) {
	const ns = "e2e-repair-zones"
	ctx := setup(t, ns)
	n := nodes(t, ctx, 8) // zones a, b, c, a, b, c, a, b
	zoneOf := nodeZones(t, ctx)
	cluster, err := localredis.StartCluster(ctx, localredis.Options{Dir: t.TempDir()}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	addrs := make([]string, 0, 6)
	for _, p := range cluster.Ports() {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	keys := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = keys.Close() })
	writeKeys(t, ctx, keys)

	redisNodes, err := cluster.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var masters []int
	replicaOf := map[int]int{}
	for _, rn := range redisNodes {
		if rn.Role == localredis.RoleMaster {
			masters = append(masters, rn.Port)
		} else {
			replicaOf[rn.MasterPort] = rn.Port
		}
	}
	a, b, c := masters[0], masters[1], masters[2]
	// A in zone-a, B in zone-b, C in zone-c; B's replica in zone-a, A's
	// in zone-b, C's in zone-a: every rule holds until B's replica is
	// promoted.
	nodeOf := map[int]string{a: n[0], replicaOf[a]: n[4], b: n[1], replicaOf[b]: n[3], c: n[2], replicaOf[c]: n[6]}
	name := func(port int) string { return "zones-redis-cluster-" + strconv.Itoa(port) }
	want, sameShard := map[string]string{}, map[string]string{}
	for port, node := range nodeOf {
		bind(t, ctx, ls.BitnamiClusterPod(ns, name(port), port).Obj(), node)
		want[name(port)] = "master"
	}
	for m, r := range replicaOf {
		want[name(r)] = "replica"
		sameShard[name(r)] = name(m)
	}
	waitRoles(t, ctx, ns, want, sameShard)
	noViolations(t, ctx, ns)

	if err := cluster.Failover(ctx, replicaOf[b]); err != nil {
		t.Fatal(err)
	}
	if got := crowdedZones(t, ctx, cluster, nodeOf, zoneOf); !slices.Equal(got, []string{zoneOf[n[0]]}) {
		t.Fatalf("after the failover, zones with two masters = %v, want [%s]", got, zoneOf[n[0]])
	}
	if got := crowdedNodes(t, ctx, cluster, nodeOf); len(got) > 0 {
		t.Fatalf("after the failover, nodes with two masters = %v, want none", got)
	}

	r := startRepairer(t, ctx, "repair-zones", ns, "--redis-roles", "--redis-roles-interval=1s",
		"--repair-cooldown=1s", "--repair-max-per-hour=100", "--repair-timeout=1m")
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, repairWait, true, func(ctx context.Context) (bool, error) {
		return len(crowdedZones(t, ctx, cluster, nodeOf, zoneOf)) == 0, nil
	})
	if err != nil {
		t.Fatalf("a zone still holds two of the three masters %s after the failover; end of the repairing replica's log:\n%s", repairWait, r.LogTail(60))
	}
	t.Logf("one master per zone again %s after the repairing replica started", time.Since(start).Round(time.Millisecond))
	if err := cluster.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("every key reads back", func(t *testing.T) { readKeys(t, ctx, keys) })

	t.Run("a graceful failover, told", func(t *testing.T) {
		// The repairer tells a repair's end at its next audit pass (2 s),
		// which may come after Redis settled.
		var got float64
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
			got = metricValue(t, ctx, r.BaseURL, `regosched_repairs_total{action="failover",outcome="repaired"}`)
			return got == 1, nil
		})
		if got != 1 {
			t.Errorf(`regosched_repairs_total{action="failover",outcome="repaired"} = %v, want 1`, got)
		}
		// The test's failover and the repair's, none twice.
		if got := failoverCalls(t, ctx, cluster); got != 2 {
			t.Errorf("Redis served %d CLUSTER FAILOVER commands, want 2 (the test's and the repair's)", got)
		}
		// Events are sent in the background: wait for it.
		var repaired []string
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
			list, err := stack.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Repaired"})
			if err != nil {
				return false, nil
			}
			repaired = repaired[:0]
			for _, e := range list.Items {
				repaired = append(repaired, fmt.Sprintf("%s: %s", e.InvolvedObject.Name, e.Message))
			}
			return len(repaired) > 0, nil
		})
		if len(repaired) == 0 {
			t.Errorf("no Repaired event in %s", ns)
		}
		t.Logf("Repaired: %s", strings.Join(repaired, "; "))
	})

	t.Run("the audit is clean", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
			_, code := runBinary(t, ctx, "audit", "--kubeconfig", stack.Cluster().KubeconfigPath())
			return code == 0, nil
		})
		if err != nil {
			out, code := runBinary(t, ctx, "audit", "--kubeconfig", stack.Cluster().KubeconfigPath())
			t.Errorf("regosched audit exited %d, want 0:\n%s", code, out)
		}
	})
}

// nodeZones maps every node to its zone label.
func nodeZones(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	list, err := stack.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, node := range list.Items {
		out[node.Name] = node.Labels[localcluster.LabelZone]
	}
	return out
}

// crowdedZones returns the zones where Redis says more than one of the
// cluster's masters run now: of three, a zone may hold one.
func crowdedZones(t *testing.T, ctx context.Context, c *localredis.Cluster, nodeOf map[int]string, zoneOf map[string]string) []string {
	t.Helper()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, rn := range nodes {
		if rn.Role == localredis.RoleMaster {
			count[zoneOf[nodeOf[rn.Port]]]++
		}
	}
	var out []string
	for zone, k := range count {
		if k > 1 {
			out = append(out, zone)
		}
	}
	slices.Sort(out)
	return out
}
