package demo

// The failover scene: a real Redis Cluster whose pods regosched placed
// correctly is failed over so that two masters share a node, which no
// scheduler can prevent (Redis moves the role, not the pod). regosched's
// audit reports it and its repair (--repair=on) hands one of the two shards
// back to an in-sync replica on another node, by a graceful CLUSTER
// FAILOVER; the keys written before are read back after.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/localredis"
	ls "github.com/regosched/regosched/test/localstack"
)

// FailoverNamespace holds the Redis Cluster of the failover scene.
const FailoverNamespace = "sessions"

// extenderArgs are the flags Run gives regosched serve on top of the
// stack's: Redis roles read every second, an audit every 2 s and the
// repair on, with a cooldown short enough for a demo (regosched raises it
// to what Redis Cluster itself imposes between failovers of a master,
// 2 × cluster-node-timeout, 10 s here). The repair keeps its state in a
// ConfigMap in --leader-elect-namespace, which must exist: "default" does.
// The shop workload is placed under the same flags; nothing of it runs, so
// the role reader and the repair leave it alone.
var extenderArgs = []string{
	"--redis-roles", "--redis-roles-interval=1s", "--audit-interval=2s",
	"--repair=on", "--repair-cooldown=1s", "--leader-elect-namespace=default",
}

const (
	// failoverKeys are written before the failover and read back after.
	failoverKeys = 10000
	// keyBatch is how many keys one pipeline writes or reads.
	keyBatch = 500
	// failoverNodes is how many nodes the scene's placement uses.
	failoverNodes = 5
	// roleWait bounds the wait for the role labels to match Redis: they are
	// read every second, the rest is margin for a busy machine.
	roleWait = 30 * time.Second
	// repairWait bounds the time from the violation to one master per node
	// again: the cooldown Redis imposes (10 s), an audit pass (2 s), the
	// failover's handshake, and margin.
	repairWait = 60 * time.Second
	// afterWait bounds the waits after the repair: Redis settling, the
	// audit's next clean pass and the Repaired Event.
	afterWait = 20 * time.Second
	// clusterName is the Helm release of the Bitnami chart the pods claim.
	clusterName = "sessions-redis-cluster"
)

// violationSample is the audit's gauge of two Redis masters on a node in
// the scene's namespace.
var violationSample = fmt.Sprintf("regosched_violations{namespace=%q,rule=\"redis-masters\"}", FailoverNamespace)

// missingRedis returns the first of the programs the scene needs that
// lookPath (exec.LookPath) cannot find, or "".
func missingRedis(lookPath func(string) (string, error)) string {
	for _, prog := range []string{"redis-server", "redis-cli"} {
		if _, err := lookPath(prog); err != nil {
			return prog
		}
	}
	return ""
}

// runFailover plays the scene on stack and writes its story to out; it
// writes why it skipped the scene instead when it cannot run here.
func runFailover(ctx context.Context, stack *ls.Stack, out io.Writer, log logrus.FieldLogger) error {
	if prog := missingRedis(exec.LookPath); prog != "" {
		why := prog + " not installed; Debian: apt-get install redis-server"
		log.WithField("why", why).Warn("skipping the repair after a Redis failover")
		_, err := fmt.Fprintf(out, "\nrepair after a failover: skipped (%s)\n", why)
		return err
	}
	nodes, err := stack.Nodes(ctx)
	if err != nil {
		return err
	}
	if len(nodes) < failoverNodes {
		why := fmt.Sprintf("needs %d nodes, the demo has %d", failoverNodes, len(nodes))
		log.WithField("why", why).Warn("skipping the repair after a Redis failover")
		_, err := fmt.Fprintf(out, "\nrepair after a failover: skipped (%s)\n", why)
		return err
	}

	dir, err := os.MkdirTemp("", "regosched-demo-redis-")
	if err != nil {
		return fmt.Errorf("creating the Redis folder: %w", err)
	}
	defer os.RemoveAll(dir)
	log.Info("starting a Redis Cluster of 3 shards, a master and a replica each")
	cluster, err := localredis.StartCluster(ctx, localredis.Options{Dir: dir, Log: log}, 3, 1)
	if err != nil {
		return fmt.Errorf("starting the Redis Cluster: %w", err)
	}
	defer func() {
		log.Info("stopping the Redis Cluster")
		cluster.Stop()
	}()
	sc := &scene{stack: stack, cluster: cluster, log: log}
	return sc.play(ctx, nodes, out)
}

// scene is the state of one run of the failover scene.
type scene struct {
	stack   *ls.Stack
	cluster *localredis.Cluster
	log     logrus.FieldLogger
	lay     layout
}

// play writes the keys, places the pods, waits for their role labels,
// fails over, waits for the repair, reads the keys back and tells it all.
func (sc *scene) play(ctx context.Context, nodes []string, out io.Writer) error {
	addrs := make([]string, 0, len(sc.cluster.Ports()))
	for _, p := range sc.cluster.Ports() {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	keys := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer keys.Close()
	if err := writeKeys(ctx, keys); err != nil {
		return err
	}
	sc.log.WithField("keys", failoverKeys).Info("keys written")

	start, err := sc.cluster.Nodes(ctx)
	if err != nil {
		return err
	}
	if sc.lay, err = newLayout(start, nodes); err != nil {
		return err
	}
	if err := sc.place(ctx); err != nil {
		return err
	}
	if err := sc.waitRoles(ctx, start); err != nil {
		return err
	}
	sc.log.Info("role labels match Redis")

	if err := sc.waitCleanStart(ctx); err != nil {
		return err
	}

	// The replica of shard 1 shares its node with master 0: allowed, until
	// it becomes a master itself.
	sc.log.WithField("pod", sc.lay.pod[sc.lay.promote]).Info("failing over shard 1 to its replica, beside the master of shard 0")
	sentAt := time.Now()
	// The audit may see the new master before Failover has seen every
	// node agree, so its gauge is watched from the moment the command goes.
	reported := sc.watchGauge(ctx, sentAt)
	defer reported()
	if err := sc.cluster.Failover(ctx, sc.lay.promote); err != nil {
		return fmt.Errorf("failing over: %w", err)
	}
	violatedAt := time.Now()
	failedOver, err := sc.cluster.Nodes(ctx)
	if err != nil {
		return err
	}
	if got := crowded(sc.lay.members(failedOver)); !slices.Equal(got, []string{sc.lay.shared}) {
		return fmt.Errorf("after the failover, nodes with two masters are %v, want [%s]", got, sc.lay.shared)
	}

	took, err := sc.waitRepair(ctx, violatedAt)
	if err != nil {
		return err
	}
	after, err := sc.waitSettled(ctx)
	if err != nil {
		return err
	}
	intact, err := readKeys(ctx, keys)
	if err != nil {
		return err
	}
	clean := sc.waitGauge(ctx, func(v float64) bool { return v == 0 })
	events, err := sc.repairEvents(ctx)
	if err != nil {
		return err
	}

	rep := report{
		Start: sc.lay.members(start), FailedOver: sc.lay.members(failedOver), Repaired: sc.lay.members(after),
		Promoted: sc.lay.pod[sc.lay.promote], Shared: sc.lay.shared, SentAt: sentAt, Settled: violatedAt.Sub(sentAt),
		Reported: reported(), Took: took, Intact: intact, Keys: failoverKeys, Clean: clean, Events: events,
	}
	if err := rep.write(out); err != nil {
		return fmt.Errorf("writing the failover scene: %w", err)
	}
	if intact != failoverKeys {
		return fmt.Errorf("%d of %d keys lost or changed across the failover and its repair", failoverKeys-intact, failoverKeys)
	}
	if !clean {
		return fmt.Errorf("one master per node again in Redis, but regosched's audit still reports %s %s later", violationSample, afterWait)
	}
	return nil
}

// layout is where the scene puts each Redis node: master 0 and the replica
// of shard 1 share one node, so that a failover of shard 1 makes the one
// violation the repair mends (two masters on a node, and so two of three
// in one zone); every rule per zone holds before it (nodes take zones a,
// b, c, a, b: one master per zone, each replica out of its master's).
type layout struct {
	node    map[int]string // by port
	pod     map[int]string // by port
	shard   map[int]int    // by port, numbered by master port at the start
	promote int            // port of the replica of shard 1
	shared  string         // the node it shares with master 0
}

// newLayout places the nodes of a fresh cluster of three shards with one
// replica each (start, as Redis says) on the first five of nodes. Pods are
// named as Bitnami's chart names them, by the order of their ports.
func newLayout(start []localredis.Node, nodes []string) (layout, error) {
	if len(nodes) < failoverNodes {
		return layout{}, fmt.Errorf("need %d nodes, have %v", failoverNodes, nodes)
	}
	var masters []int
	replicaOf := map[int]int{}
	for _, n := range start {
		if n.Role == localredis.RoleMaster {
			masters = append(masters, n.Port)
		} else {
			replicaOf[n.MasterPort] = n.Port
		}
	}
	slices.Sort(masters)
	if len(masters) != 3 || len(replicaOf) != 3 {
		return layout{}, fmt.Errorf("want 3 masters with a replica each, Redis says %v", start)
	}
	l := layout{node: map[int]string{}, pod: map[int]string{}, shard: map[int]int{}}
	ports := make([]int, 0, len(start))
	for _, n := range start {
		ports = append(ports, n.Port)
	}
	slices.Sort(ports)
	for i, p := range ports {
		l.pod[p] = fmt.Sprintf("%s-%d", clusterName, i)
	}
	for i, m := range masters {
		l.shard[m], l.shard[replicaOf[m]] = i, i
	}
	a, b, c := masters[0], masters[1], masters[2]
	l.promote, l.shared = replicaOf[b], nodes[0]
	l.node[a], l.node[replicaOf[b]] = nodes[0], nodes[0]
	l.node[b], l.node[replicaOf[a]] = nodes[1], nodes[4]
	l.node[c], l.node[replicaOf[c]] = nodes[2], nodes[3]
	return l, nil
}

// member is one Redis node as the scene placed it and as Redis says it is.
type member struct {
	Node  string
	Pod   string
	Role  string // "master" or "replica"
	Shard int
}

// members reads now (Redis's own view, localredis.Cluster.Nodes) through
// the layout; they come sorted by node, then pod.
func (l layout) members(now []localredis.Node) []member {
	out := make([]member, 0, len(now))
	for _, n := range now {
		m := member{Node: l.node[n.Port], Pod: l.pod[n.Port], Role: "master", Shard: l.shard[n.Port]}
		if n.Role != localredis.RoleMaster {
			m.Role, m.Shard = "replica", l.shard[n.MasterPort]
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(x, y member) int { return cmp.Or(cmp.Compare(x.Node, y.Node), cmp.Compare(x.Pod, y.Pod)) })
	return out
}

// crowded returns the nodes where two masters run, sorted.
func crowded(ms []member) []string {
	count := map[string]int{}
	for _, m := range ms {
		if m.Role == "master" {
			count[m.Node]++
		}
	}
	var out []string
	for node, k := range count {
		if k > 1 {
			out = append(out, node)
		}
	}
	slices.Sort(out)
	return out
}

// place creates the scene's pods bound to their nodes and reports them
// running: the placement is already made (the scene is about what happens
// after), and no kubelet runs here to start them.
func (sc *scene) place(ctx context.Context) error {
	if err := sc.stack.EnsureNamespace(ctx, FailoverNamespace); err != nil {
		return err
	}
	ports := make([]int, 0, len(sc.lay.pod))
	for p := range sc.lay.pod {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	for _, p := range ports {
		pod := ls.BitnamiClusterPod(FailoverNamespace, sc.lay.pod[p], p).Node(sc.lay.node[p]).Obj()
		if err := ls.CreateRunning(ctx, sc.stack.Client(), pod); err != nil {
			return err
		}
	}
	sc.log.WithFields(logrus.Fields{"namespace": FailoverNamespace, "pods": len(ports)}).Info("Redis Cluster pods bound and running")
	return nil
}

// waitRoles waits until regosched's role labels (regosched.io/role and
// regosched.io/shard) say what Redis says (start): the repair acts on
// what the labels tell, so the failover must come after.
func (sc *scene) waitRoles(ctx context.Context, start []localredis.Node) error {
	want := map[string]string{}      // pod -> role
	sameShard := map[string]string{} // replica pod -> its master's pod
	for _, n := range start {
		if n.Role == localredis.RoleMaster {
			want[sc.lay.pod[n.Port]] = "master"
		} else {
			want[sc.lay.pod[n.Port]] = "replica"
			sameShard[sc.lay.pod[n.Port]] = sc.lay.pod[n.MasterPort]
		}
	}
	var got map[string][2]string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
		list, err := sc.stack.Client().CoreV1().Pods(FailoverNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // the next look may work
		}
		got = map[string][2]string{}
		for _, p := range list.Items {
			got[p.Name] = [2]string{p.Labels["regosched.io/role"], p.Labels["regosched.io/shard"]}
		}
		return labelsMatch(got, want, sameShard), nil
	})
	if err != nil {
		return fmt.Errorf("the role labels %v never matched Redis within %s (want roles %v, replica -> master %v): %w", got, roleWait, want, sameShard, err)
	}
	return nil
}

// labelsMatch reports whether every pod of want has its role and a shard
// (got holds role and shard by pod), and every replica of sameShard the
// shard of its master.
func labelsMatch(got map[string][2]string, want, sameShard map[string]string) bool {
	for pod, role := range want {
		if got[pod][0] != role || got[pod][1] == "" {
			return false
		}
	}
	for replica, master := range sameShard {
		if got[replica][1] != got[master][1] {
			return false
		}
	}
	return true
}

// waitRepair waits until Redis says one master per node again and
// returns how long after violatedAt that was.
func (sc *scene) waitRepair(ctx context.Context, violatedAt time.Time) (time.Duration, error) {
	sc.log.WithField("within", repairWait).Info("two masters share a node; waiting for regosched's repair")
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, repairWait, true, func(ctx context.Context) (bool, error) {
		now, err := sc.cluster.Nodes(ctx)
		if err != nil {
			return false, nil // a node busy with the failover; look again
		}
		last = crowded(sc.lay.members(now))
		return len(last) == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("the repair did not happen: two Redis masters still share node(s) %v %s after the failover (%w); end of the logs:\n%s",
			last, repairWait, err, sc.stack.LogTails(40))
	}
	took := time.Since(violatedAt)
	sc.log.WithField("after", took.Round(time.Millisecond)).Info("repaired: one master per node again")
	return took, nil
}

// watchGauge looks at the audit's gauge every 100 ms in the background
// until the returned function is called, which returns how long after
// since the gauge first said the violation (0: never seen). It may be
// called more than once.
func (sc *scene) watchGauge(ctx context.Context, since time.Time) func() time.Duration {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan time.Duration, 1)
	go func() {
		var seen time.Duration
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if v, err := sc.violations(ctx); err == nil && v > 0 {
				seen = time.Since(since)
				sc.log.WithField("after", seen.Round(time.Millisecond)).Info("the audit reports the violation")
				return true, nil
			}
			return false, nil
		})
		done <- seen
	}()
	return sync.OnceValue(func() time.Duration {
		cancel()
		return <-done
	})
}

// waitSettled waits until every replica follows a master, as Redis says,
// and returns the roles then.
func (sc *scene) waitSettled(ctx context.Context) ([]localredis.Node, error) {
	var now []localredis.Node
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, afterWait, true, func(ctx context.Context) (bool, error) {
		var err error
		if now, err = sc.cluster.Nodes(ctx); err != nil {
			return false, nil
		}
		return settled(now), nil
	})
	if err != nil {
		return nil, fmt.Errorf("the Redis Cluster did not settle after the repair (%v): %w", now, err)
	}
	return now, nil
}

// settled reports whether nodes are three masters, each followed by one
// replica.
func settled(nodes []localredis.Node) bool {
	masters, followers := map[int]bool{}, map[int]int{}
	for _, n := range nodes {
		if n.Role == localredis.RoleMaster {
			masters[n.Port] = true
		} else {
			followers[n.MasterPort]++
		}
	}
	if len(masters) != 3 {
		return false
	}
	for m := range masters {
		if followers[m] != 1 {
			return false
		}
	}
	return len(followers) == 3
}

// violations reads the audit's gauge for the scene; a gauge without the
// sample counts 0 (the audit resets it each pass).
func (sc *scene) violations(ctx context.Context) (float64, error) {
	body, err := sc.stack.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	return sampleValue(body, violationSample)
}

// sampleValue returns sample's value in Prometheus text format body, 0 if
// it is absent.
func sampleValue(body []byte, sample string) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return strconv.ParseFloat(strings.Fields(rest)[0], 64)
		}
	}
	return 0, sc.Err()
}

// auditPasses counts the audit's passes (each observes its duration).
const auditPasses = "regosched_audit_duration_seconds_count"

// waitCleanStart waits until two audit passes have ended since the role
// labels matched Redis and the last says no violation. The pods start
// unlabelled, and a pass that read them so may count a violation (and the
// repair tell that it will not act on unknown roles); one pass may have
// begun before the labels were in, the next has them. From then on, what
// the audit reports is the failover's doing.
func (sc *scene) waitCleanStart(ctx context.Context) error {
	body, err := sc.stack.Metrics(ctx)
	if err != nil {
		return err
	}
	from, err := sampleValue(body, auditPasses)
	if err != nil {
		return err
	}
	var passes, v float64
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, afterWait, true, func(ctx context.Context) (bool, error) {
		body, err := sc.stack.Metrics(ctx)
		if err != nil {
			return false, nil
		}
		if passes, err = sampleValue(body, auditPasses); err != nil {
			return false, err
		}
		if v, err = sampleValue(body, violationSample); err != nil {
			return false, err
		}
		return passes >= from+2 && v == 0, nil
	})
	if err != nil {
		return fmt.Errorf("before the failover, regosched's audit ran %v passes and reports %s = %v, want 2 passes or more and 0 (%w); end of the logs:\n%s",
			passes-from, violationSample, v, err, sc.stack.LogTails(40))
	}
	sc.log.WithField("passes", passes-from).Info("the audit finds no violation before the failover")
	return nil
}

// waitGauge waits until ok accepts the audit's gauge for the scene and
// reports whether it did within afterWait.
func (sc *scene) waitGauge(ctx context.Context, ok func(float64) bool) bool {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, afterWait, true, func(ctx context.Context) (bool, error) {
		v, err := sc.violations(ctx)
		return err == nil && ok(v), nil
	})
	return err == nil
}

// repairReasons are the Events the repair writes on the pods it concerns.
var repairReasons = []string{"RepairPlanned", "Repaired", "RepairFailed"}

// repairEvents waits for the Repaired Event (written at the audit pass
// that finds the violation gone) and returns the repair's Events in the
// namespace, oldest first.
func (sc *scene) repairEvents(ctx context.Context) ([]corev1.Event, error) {
	var events []corev1.Event
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, afterWait, true, func(ctx context.Context) (bool, error) {
		list, err := sc.stack.Client().CoreV1().Events(FailoverNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		events = repairOnly(list.Items)
		return slices.ContainsFunc(events, func(e corev1.Event) bool { return e.Reason == "Repaired" }), nil
	})
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	if err != nil {
		sc.log.WithField("within", afterWait).Warn("no Repaired Event")
	}
	return events, nil
}

// repairOnly keeps the repair's Events, oldest first.
func repairOnly(all []corev1.Event) []corev1.Event {
	var out []corev1.Event
	for _, e := range all {
		if slices.Contains(repairReasons, e.Reason) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(x, y corev1.Event) int { return eventTime(x).Compare(eventTime(y)) })
	return out
}

// eventTime is when e happened: events.k8s.io Events (which the repair
// records) set EventTime, core/v1 ones the timestamps.
func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.EventTime.Time, e.LastTimestamp.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// writeKeys sets failoverKeys keys, key:i = value-i, in pipelines.
func writeKeys(ctx context.Context, c *redis.ClusterClient) error {
	for from := 0; from < failoverKeys; from += keyBatch {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < min(from+keyBatch, failoverKeys); i++ {
				p.Set(ctx, fmt.Sprintf("key:%d", i), fmt.Sprintf("value-%d", i), 0)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("writing keys: %w", err)
		}
	}
	return nil
}

// readKeys reads every key back and returns how many have their value.
// A batch that fails as a whole (the cluster still telling clients where
// slots went) is tried again for a while.
func readKeys(ctx context.Context, c *redis.ClusterClient) (int, error) {
	intact := 0
	for from := 0; from < failoverKeys; from += keyBatch {
		var cmds []redis.Cmder
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, afterWait, true, func(ctx context.Context) (bool, error) {
			var err error
			cmds, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i := from; i < min(from+keyBatch, failoverKeys); i++ {
					p.Get(ctx, fmt.Sprintf("key:%d", i))
				}
				return nil
			})
			// redis.Nil is a missing key: counted below, not retried.
			return err == nil || errors.Is(err, redis.Nil), nil
		})
		if err != nil {
			return 0, fmt.Errorf("reading keys %d..%d: %w", from, min(from+keyBatch, failoverKeys)-1, err)
		}
		for j, cmd := range cmds {
			v, err := cmd.(*redis.StringCmd).Result()
			if err == nil && v == fmt.Sprintf("value-%d", from+j) {
				intact++
			}
		}
	}
	return intact, nil
}

// report is what the scene tells.
type report struct {
	// Start, FailedOver and Repaired are the members at the start, after
	// the failover and after the repair, as Redis says.
	Start, FailedOver, Repaired []member
	// Promoted is the replica's pod the failover made a master, beside
	// another master on node Shared.
	Promoted, Shared string
	// SentAt is when CLUSTER FAILOVER was sent; Settled how long after
	// every node agreed on the new roles, when the violation was there
	// for all to see.
	SentAt  time.Time
	Settled time.Duration
	// Reported is the time from SentAt to the audit's report of the
	// violation (0: not seen), Took from Settled to one master per node
	// again.
	Reported, Took time.Duration
	// Intact of Keys read back with their value.
	Intact, Keys int
	// Clean says whether the audit's gauge went back to 0.
	Clean bool
	// Events are the repair's, oldest first.
	Events []corev1.Event
}

// write prints the report: a table of each pod's role in the three
// states, which nodes held two masters, the times, the keys and the
// Events.
func (r report) write(w io.Writer) error {
	var b strings.Builder
	b.WriteString("\nrepair after a failover (Redis Cluster \"sessions\": 3 shards, a master and a replica each; regosched --repair=on)\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOD\tAT START\tAFTER FAILOVER\tAFTER REPAIR")
	state := func(ms []member, pod string) string {
		for _, m := range ms {
			if m.Pod == pod {
				return fmt.Sprintf("%s, shard %d", m.Role, m.Shard)
			}
		}
		return "?"
	}
	prev := ""
	for _, m := range r.Start {
		node := m.Node
		if node == prev {
			node = ""
		}
		prev = m.Node
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", node, m.Pod, state(r.Start, m.Pod), state(r.FailedOver, m.Pod), state(r.Repaired, m.Pod))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nnodes with two masters: at start %s; after the failover %s; after the repair %s\n",
		nodeList(crowded(r.Start)), nodeList(crowded(r.FailedOver)), nodeList(crowded(r.Repaired)))
	fmt.Fprintf(&b, "failover: CLUSTER FAILOVER to %s, a replica beside a master on %s; roles settled %s after it was sent\n",
		r.Promoted, r.Shared, seconds(r.Settled))
	if r.Reported > 0 {
		fmt.Fprintf(&b, "audit reported it: %s after the failover was sent (%s = 1)\n", seconds(r.Reported), violationSample)
	} else {
		b.WriteString("audit reported it: not seen (the gauge was never 1 when looked at)\n")
	}
	fmt.Fprintf(&b, "repaired: %s after the roles settled (one master per node again, as Redis says)\n", seconds(r.Took))
	if r.Clean {
		b.WriteString("audit after the repair: clean (0 violations)\n")
	} else {
		fmt.Fprintf(&b, "audit after the repair: still reports the violation %s later\n", afterWait)
	}
	intact := "intact"
	if r.Intact != r.Keys {
		intact = fmt.Sprintf("with their value; %d LOST or changed", r.Keys-r.Intact)
	}
	fmt.Fprintf(&b, "keys: %d of %d read back %s\n", r.Intact, r.Keys, intact)
	if len(r.Events) == 0 {
		b.WriteString("repair events: none\n")
	} else {
		b.WriteString("repair events (time since the failover was sent, reason, pod, message):\n")
	}
	for _, e := range r.Events {
		fmt.Fprintf(&b, "  %+.1fs %s %s: %s\n", eventTime(e).Sub(r.SentAt).Seconds(), e.Reason, e.InvolvedObject.Name, e.Message)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// seconds is d in seconds with one decimal, e.g. "11.6s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// nodeList is "none" or the nodes joined by commas.
func nodeList(nodes []string) string {
	if len(nodes) == 0 {
		return "none"
	}
	return strings.Join(nodes, ", ")
}
