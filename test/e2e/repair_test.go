//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localredis"
	"github.com/regosched/regosched/test/localstack"
)

const (
	// repairKeys are written before the failovers and read back after.
	repairKeys = 10000
	// repairRuns is how many failovers the repair mends, timed.
	repairRuns = 5
	// repairWait bounds one repair: two audit intervals of the repairing
	// replica (2 s), its cooldown (1 s), role reads (1 s) and a failover's
	// handshake, with margin for a busy machine.
	repairWait = 60 * time.Second
	// voteWindow is 2×cluster-node-timeout of localredis (5 s), and a second.
	voteWindow = 11 * time.Second
)

// A real Redis Cluster failover puts two masters on one node. In plan mode
// (the stack's regosched, as deployed) the repair is announced and nothing
// changes; a regosched with --repair=on then hands one master's shard to
// its in-sync replica elsewhere, each time, and no key is lost.
func TestRepairAfterFailover(t *testing.T) {
	const ns = "e2e-repair"
	ctx := setup(t, ns)
	sc := newRepairScene(t, ctx, ns)
	cluster, nodeOf, n, keys, name, a := sc.cluster, sc.nodeOf, sc.nodes, sc.keys, sc.name, sc.a
	failovers := 1 // sent by this test

	t.Run("plan mode announces and changes nothing", func(t *testing.T) {
		if !hasEvent(ctx, ns, name(a), "RepairPlanned", "would failover") {
			t.Errorf("no RepairPlanned event on %s naming a failover", name(a))
		}
		out, code := runBinary(t, ctx, "audit", "--plan", "--kubeconfig", stack.Cluster().KubeconfigPath())
		if code != 1 || !strings.Contains(out, "failover") || !strings.Contains(out, "CLUSTER FAILOVER") {
			t.Errorf("regosched audit --plan exited %d, want 1 and a planned CLUSTER FAILOVER:\n%s", code, out)
		}
		t.Logf("regosched audit --plan:\n%s", out)
		// Two passes of the stack's audit (5 s each) later, Redis is as it was.
		time.Sleep(11 * time.Second)
		if got := crowdedNodes(t, ctx, cluster, nodeOf); !slices.Equal(got, []string{n[0]}) {
			t.Errorf("in plan mode, nodes with two masters = %v, want [%s] unchanged", got, n[0])
		}
	})

	r := startRepairer(t, ctx, "repair", ns, "--redis-roles", "--redis-roles-interval=1s",
		"--repair-cooldown=1s", "--repair-max-per-hour=100", "--repair-timeout=1m")

	// The violation of the plan phase is repaired first, then each run
	// makes a new one: the replica on n[0] takes over its shard.
	var took []time.Duration
	for run := 0; run <= repairRuns; run++ {
		start := time.Now()
		if run > 0 {
			// Not cluster.Failover, which waits for the cluster to settle
			// in the new roles: the repair may already be on its way back.
			// Redis Cluster's masters refuse to vote twice about one
			// master within 2×cluster-node-timeout (10 s here): wait that
			// out, as the repair does, or the failover is given up unseen.
			time.Sleep(voteWindow)
			port := replicaOn(t, ctx, cluster, nodeOf, n[0])
			start = promote(t, ctx, cluster, port)
			failovers++
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, repairWait, true, func(ctx context.Context) (bool, error) {
			return len(crowdedNodes(t, ctx, cluster, nodeOf)) == 0, nil
		})
		if err != nil {
			t.Fatalf("run %d: two masters still share a node %s after the failover; end of the repairing replica's log:\n%s", run, repairWait, r.LogTail(40))
		}
		if run > 0 {
			took = append(took, time.Since(start))
		}
		// The demoted master syncs from its new master before the next
		// failover, as an operator's next one would wait for.
		if err := cluster.WaitSettled(ctx); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("time from the violation (failover settled) to one master per node, %d runs: median %s, range %s..%s, all %v",
		len(took), sorted[len(sorted)/2].Round(time.Millisecond), sorted[0].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), took)

	t.Run("every key reads back", func(t *testing.T) { readKeys(t, ctx, keys) })

	t.Run("the audit is clean and the repairs are told", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
			_, code := runBinary(t, ctx, "audit", "--kubeconfig", stack.Cluster().KubeconfigPath())
			return code == 0, nil
		})
		if err != nil {
			out, code := runBinary(t, ctx, "audit", "--kubeconfig", stack.Cluster().KubeconfigPath())
			t.Errorf("regosched audit exited %d, want 0:\n%s", code, out)
		}
		// The repairer tells a repair's end at its next audit pass (2 s),
		// which may come after the CLI's.
		var repaired, started float64
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
			repaired = metricValue(t, ctx, r.BaseURL, `regosched_repairs_total{action="failover",outcome="repaired"}`)
			started = metricValue(t, ctx, r.BaseURL, `regosched_repairs_total{action="failover",outcome="started"}`)
			return repaired == repairRuns+1, nil
		})
		if repaired != repairRuns+1 || started != repairRuns+1 {
			t.Errorf("regosched_repairs_total failover started %v, repaired %v; want %d each", started, repaired, repairRuns+1)
		}
		// Redis counts every CLUSTER FAILOVER it was sent: the test's and
		// the repairs', none twice.
		if got := failoverCalls(t, ctx, cluster); got != failovers+repairRuns+1 {
			t.Errorf("Redis served %d CLUSTER FAILOVER commands, want %d (%d by the test, %d repairs)", got, failovers+repairRuns+1, failovers, repairRuns+1)
		}
		events, err := stack.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for _, e := range events.Items {
			if e.Reason == "Repaired" {
				count++
			}
		}
		if count == 0 {
			t.Errorf("no Repaired event in %s", ns)
		}
	})
}

// repairScene is a real Redis Cluster of 3 shards, a master and a replica
// each, holding repairKeys keys, whose pods (Bitnami's redis-cluster
// chart) are bound so that master A and the replica of shard B share
// nodes[0] and the others stand alone; then a real failover of shard B has
// put two masters on nodes[0].
type repairScene struct {
	cluster *localredis.Cluster
	keys    *redis.ClusterClient
	nodes   []string
	nodeOf  map[int]string // port -> node
	name    func(port int) string
	a       int // master A's port
}

func newRepairScene(t *testing.T, ctx context.Context, ns string) *repairScene {
	t.Helper()
	n := nodes(t, ctx, 8)
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

	s := placeSessions(t, ctx, ns, cluster, n)
	nodeOf, replicaOf, b := s.nodeOf, s.replicaOf, s.masters[1]
	if err := cluster.Failover(ctx, replicaOf[b]); err != nil {
		t.Fatal(err)
	}
	if got := crowdedNodes(t, ctx, cluster, nodeOf); !slices.Equal(got, []string{n[0]}) {
		t.Fatalf("after the failover, nodes with two masters = %v, want [%s]", got, n[0])
	}
	return &repairScene{cluster: cluster, keys: keys, nodes: n, nodeOf: nodeOf, name: s.name, a: s.masters[0]}
}

// writeKeys sets repairKeys keys, in pipelines.
func writeKeys(t *testing.T, ctx context.Context, c *redis.ClusterClient) {
	t.Helper()
	for from := 0; from < repairKeys; from += 500 {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < min(from+500, repairKeys); i++ {
				p.Set(ctx, fmt.Sprintf("key:%d", i), fmt.Sprintf("value-%d", i), 0)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("writing keys: %v", err)
		}
	}
}

// readKeys fails the test for each key missing or changed.
func readKeys(t *testing.T, ctx context.Context, c *redis.ClusterClient) {
	t.Helper()
	lost := 0
	for from := 0; from < repairKeys; from += 500 {
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < min(from+500, repairKeys); i++ {
				p.Get(ctx, fmt.Sprintf("key:%d", i))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("reading keys: %v", err)
		}
		for j, cmd := range cmds {
			v, err := cmd.(*redis.StringCmd).Result()
			if want := fmt.Sprintf("value-%d", from+j); err != nil || v != want {
				lost++
			}
		}
	}
	t.Logf("%d of %d keys read back with their value; %d lost", repairKeys-lost, repairKeys, lost)
	if lost > 0 {
		t.Errorf("%d keys lost", lost)
	}
}

// promote sends CLUSTER FAILOVER to the replica at port and returns when
// ROLE there first says master: the moment two masters share its node.
func promote(t *testing.T, ctx context.Context, c *localredis.Cluster, port int) time.Time {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer cl.Close()
	if err := cl.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %d: %v", port, err)
	}
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		role, err := c.Role(ctx, port)
		at = time.Now()
		return err == nil && role == localredis.RoleMaster, nil
	})
	if err != nil {
		t.Fatalf("%d never became master after CLUSTER FAILOVER", port)
	}
	return at
}

// crowdedNodes returns the nodes where Redis says two masters run now.
func crowdedNodes(t *testing.T, ctx context.Context, c *localredis.Cluster, nodeOf map[int]string) []string {
	t.Helper()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, rn := range nodes {
		if rn.Role == localredis.RoleMaster {
			count[nodeOf[rn.Port]]++
		}
	}
	var out []string
	for node, k := range count {
		if k > 1 {
			out = append(out, node)
		}
	}
	sort.Strings(out)
	return out
}

// replicaOn returns the port of the replica on node.
func replicaOn(t *testing.T, ctx context.Context, c *localredis.Cluster, nodeOf map[int]string, node string) int {
	t.Helper()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rn := range nodes {
		if rn.Role == localredis.RoleReplica && nodeOf[rn.Port] == node {
			return rn.Port
		}
	}
	t.Fatalf("no replica on %s: %v", node, nodes)
	return 0
}

// failoverCalls sums the CLUSTER FAILOVER commands every node served.
func failoverCalls(t *testing.T, ctx context.Context, c *localredis.Cluster) int {
	t.Helper()
	total := 0
	for _, p := range c.Ports() {
		cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p)})
		stats, err := cl.Info(ctx, "commandstats").Result()
		_ = cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(stats, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_cluster|failover:calls="); ok {
				calls, _, _ := strings.Cut(rest, ",")
				k, _ := strconv.Atoi(calls)
				total += k
			}
		}
	}
	return total
}

// hasEvent reports whether pod gets a Normal event of reason whose
// message contains text, within roleWait (the repair's are all Normal but
// RepairFailed).
func hasEvent(ctx context.Context, ns, pod, reason, text string) bool {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
		list, err := stack.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeNormal && e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
	return err == nil
}

// metricValue reads one sample from the /metrics of the regosched at base.
func metricValue(t *testing.T, ctx context.Context, base, sample string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// Killed in the middle of a repair (its record written, its CLUSTER
// FAILOVER sent or about to be), the leader leaves the record behind: the
// replica that leads next follows the repair up and reports it (Repaired,
// or RepairFailed after the timeout), and never sends it again. The
// cluster stays healthy and keeps every key.
func TestRepairLeaderKilledMidRepair(t *testing.T) {
	const ns = "e2e-repair-ha"
	ctx := setup(t, ns)
	sc := newRepairScene(t, ctx, ns)
	before := failoverCalls(t, ctx, sc.cluster)
	// Names of this run only: a process's log, the Lease and the state
	// ConfigMap would outlive it into a run with -count.
	run := "repair-ha-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	args := []string{"--redis-roles", "--redis-roles-interval=1s", "--audit-interval=2s",
		"--repair=on", "--repair-cooldown=1s", "--repair-timeout=30s",
		"--leader-elect", "--leader-elect-namespace=" + ns, "--leader-elect-name=" + run,
		"--redis-roles-configmap=", "--repair-configmap=" + run}
	var replicas []*localstack.Replica
	for i := range 2 {
		listen, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		r, err := stack.StartReplicaAt(ctx, fmt.Sprintf("%s-%d", run, i), listen, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		replicas = append(replicas, r)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range replicas {
				t.Logf("end of %s's log:\n%s", r.Name, r.LogTail(60))
			}
		}
	})

	// The moment the record of the repair is written, kill its writer.
	cms := stack.Client().CoreV1().ConfigMaps(ns)
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, run, metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["state.json"], `"inFlight"`), nil
	})
	if err != nil {
		t.Fatal("no repair was recorded in flight within 60 s")
	}
	// Its log line follows the record by microseconds.
	leader := -1
	err = wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		leader = slices.IndexFunc(replicas, func(r *localstack.Replica) bool { return strings.Contains(r.LogTail(400), "repair started") })
		return leader >= 0, nil
	})
	if err != nil {
		t.Fatal("a repair is in flight, but no replica logged that it started one")
	}
	killed, survivor := replicas[leader], replicas[1-leader]
	if err := killed.Kill(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(killed.LogTail(400), "msg=repaired") {
		t.Fatalf("%s ended the repair before it was killed: the test missed the moment", killed.Name)
	}
	t.Logf("killed %s with a repair in flight", killed.Name)

	// The survivor leads within a lease (15 s) and ends the repair.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, run, metav1.GetOptions{})
		return err == nil && !strings.Contains(cm.Data["state.json"], `"inFlight"`), nil
	})
	if err != nil {
		t.Fatalf("the repair is still in flight 90 s after its leader was killed")
	}
	log := survivor.LogTail(400)
	switch {
	case strings.Contains(log, "msg=repaired"):
		t.Logf("%s followed the repair up: repaired", survivor.Name)
		if got := crowdedNodes(t, ctx, sc.cluster, sc.nodeOf); len(got) != 0 {
			t.Errorf("repaired, but nodes with two masters: %v", got)
		}
	case strings.Contains(log, "repair failed"):
		t.Logf("%s followed the repair up: reported it failed (its leader died before sending it)", survivor.Name)
	default:
		t.Errorf("%s ended the repair in flight without logging repaired or failed", survivor.Name)
	}
	if calls := failoverCalls(t, ctx, sc.cluster) - before; calls > 1 {
		t.Errorf("Redis served %d CLUSTER FAILOVER commands for one repair, want at most 1", calls)
	}
	if err := sc.cluster.WaitSettled(ctx); err != nil {
		t.Errorf("the cluster is not healthy after the handover: %v", err)
	}
	readKeys(t, ctx, sc.keys)
}

// A Redis master beside its own replica (Bitnami's redis chart with
// Sentinel, real replication): the replica is evicted through the real
// API server's Eviction API, after a dry run, and the master stays, with
// its data.
func TestRepairEvictsTheReplicaBesideItsMaster(t *testing.T) {
	const ns = "e2e-repair-evict"
	ctx := setup(t, ns)
	n := nodes(t, ctx, 1)
	rep, err := localredis.StartReplication(ctx, localredis.Options{Dir: t.TempDir()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Stop()
	masterPort, replicaPort := rep.Ports()[0], rep.Ports()[1]
	data := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(masterPort)})
	defer data.Close()
	if err := data.Set(ctx, "order:1", "paid", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Pods of Bitnami's redis chart in sentinel mode, whose Redis listens
	// on 127.0.0.1 at the port named redis.
	sentinel := map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "node"}
	// Names of this run only: Events, and roles remembered by name, would
	// outlive it into a run with -count.
	run := "repair-evict-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	masterPod, replicaPod := run+"-0", run+"-1"
	// Both on one node: placed before a rule existed, say.
	for name, port := range map[string]int{masterPod: masterPort, replicaPod: replicaPort} {
		bind(t, ctx, fixture.MakePod().Namespace(ns).Name(name).Labels(sentinel).StatefulSetPodName().Schedulable().
			StatefulSet("sessions-redis-cluster", localstack.BitnamiStatefulSetUID).ContainerPort("redis", int32(port)).Obj(), n[0])
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
		got, err := roleLabels(ctx, ns)
		return err == nil && got[masterPod] == "master/" && got[replicaPod] == "replica/", nil
	})
	if err != nil {
		t.Fatal("the role labels never matched Redis")
	}

	r := startRepairer(t, ctx, "repair-evict", ns, "--redis-roles", "--redis-roles-interval=1s")

	// The eviction marks the replica for deletion; a kubelet would then
	// stop it and the pod would go, which localstack.RemoveTerminating does here.
	// Until then it still stands on its node, and the repair waits.
	pods := stack.Client().CoreV1().Pods(ns)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, repairWait, true, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, replicaPod, metav1.GetOptions{})
		return err != nil || p.DeletionTimestamp != nil, nil
	})
	if err != nil {
		t.Fatalf("the replica beside its master was not evicted within %s", repairWait)
	}
	if _, err := localstack.RemoveTerminating(ctx, stack.Client(), ns); err != nil {
		t.Fatal(err)
	}
	if p, err := pods.Get(ctx, masterPod, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the master pod: %v, deleting %v; want it untouched", err, p.GetDeletionTimestamp())
	}
	if !hasEvent(ctx, ns, replicaPod, "Repaired", "evict of "+ns+"/"+replicaPod+" cleared") {
		t.Error("no Repaired event on the evicted replica")
	}
	if v, err := data.Get(ctx, "order:1").Result(); err != nil || v != "paid" {
		t.Errorf("the master's data: %q, %v; want paid", v, err)
	}
	sample := `regosched_repairs_total{action="evict",outcome="repaired"}`
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
		return metricValue(t, ctx, r.BaseURL, sample) == 1, nil
	}); err != nil {
		t.Errorf("%s = %v, want 1", sample, metricValue(t, ctx, r.BaseURL, sample))
	}
}

// startRepairer starts a regosched replica named name (made unique to the
// run: its log and state ConfigMap would outlive it into a run with
// -count) that leads in ns and repairs (--repair=on), auditing every 2 s,
// with args after those defaults; it stops when the test ends, and shows
// its log when the test failed.
func startRepairer(t *testing.T, ctx context.Context, name, ns string, args ...string) *localstack.Replica {
	t.Helper()
	listen, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	run := name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	all := append([]string{"--audit-interval=2s", "--repair=on", "--leader-elect-namespace=" + ns,
		"--redis-roles-configmap=", "--repair-configmap=" + run}, args...)
	r, err := stack.StartReplicaAt(ctx, run, listen, all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of the repairing replica's log:\n%s", r.LogTail(80))
		}
	})
	return r
}
