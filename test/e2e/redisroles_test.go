//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localredis"
	ls "github.com/regosched/regosched/test/localstack"
)

const (
	labelRole  = "regosched.io/role"
	labelShard = "regosched.io/shard"
	// roleWait bounds the wait for labels: the stack checks every second
	// (see main_test.go); the rest is margin for a busy machine.
	roleWait = 20 * time.Second
)

// running reports pod as running at 127.0.0.1, as a kubelet would.
func running(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	if err := ls.ReportRunning(ctx, stack.Client(), ns, name); err != nil {
		t.Fatal(err)
	}
}

// bind creates pod on node directly, running: a placement already made.
func bind(t *testing.T, ctx context.Context, pod *corev1.Pod, node string) {
	t.Helper()
	pod.Spec.NodeName = node
	if err := ls.CreateRunning(ctx, stack.Client(), pod); err != nil {
		t.Fatal(err)
	}
}

// roleLabels reads role/shard of each named pod.
func roleLabels(ctx context.Context, ns string) (map[string]string, error) {
	list, err := stack.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = p.Labels[labelRole] + "/" + p.Labels[labelShard]
	}
	return out, nil
}

// waitRoles waits until every pod of want has a role and shard label whose
// role is want's and whose shard is the same as its master's; it returns
// how long it took.
func waitRoles(t *testing.T, ctx context.Context, ns string, want map[string]string, sameShard map[string]string) time.Duration {
	t.Helper()
	start := time.Now()
	var got map[string]string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
		var err error
		if got, err = roleLabels(ctx, ns); err != nil {
			return false, err
		}
		for name, role := range want {
			r, shard, _ := strings.Cut(got[name], "/")
			if r != role || shard == "" {
				return false, nil
			}
		}
		for replica, master := range sameShard {
			if _, a, _ := strings.Cut(got[replica], "/"); a != strings.SplitN(got[master], "/", 2)[1] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("role labels %v never matched Redis: want roles %v, replica->master %v", got, want, sameShard)
	}
	return time.Since(start)
}

// sessions is a Redis Cluster of 3 shards placed as Bitnami's chart's
// pods: master A and the replica of shard B share nodes[0], which is
// allowed until that replica becomes a master; every other member has a
// node of its own.
type sessions struct {
	masters   []int          // ports, as created
	replicaOf map[int]int    // master port -> its replica's port
	nodeOf    map[int]string // port -> node
	name      func(port int) string
	want      map[string]string // pod -> role
	took      time.Duration     // until the labels matched ROLE
}

// placeSessions binds the pods of cluster's nodes as sessions says and
// waits until their role labels match Redis.
func placeSessions(t *testing.T, ctx context.Context, ns string, cluster *localredis.Cluster, n []string) sessions {
	t.Helper()
	redisNodes, err := cluster.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := sessions{replicaOf: map[int]int{}, want: map[string]string{},
		name: func(port int) string { return "sessions-redis-cluster-" + strconv.Itoa(port) }}
	for _, rn := range redisNodes {
		if rn.Role == localredis.RoleMaster {
			s.masters = append(s.masters, rn.Port)
		} else {
			s.replicaOf[rn.MasterPort] = rn.Port
		}
	}
	a, b, c := s.masters[0], s.masters[1], s.masters[2]
	// Nodes take zones a, b, c, a, b: a master per zone, each replica out
	// of its master's; master a and the replica of b share n[0].
	s.nodeOf = map[int]string{a: n[0], s.replicaOf[b]: n[0], b: n[1], s.replicaOf[a]: n[4], c: n[2], s.replicaOf[c]: n[3]}
	sameShard := map[string]string{}
	for port, node := range s.nodeOf {
		bind(t, ctx, ls.BitnamiClusterPod(ns, s.name(port), port).Obj(), node)
		s.want[s.name(port)] = "master"
	}
	for m, r := range s.replicaOf {
		s.want[s.name(r)] = "replica"
		sameShard[s.name(r)] = s.name(m)
	}
	s.took = waitRoles(t, ctx, ns, s.want, sameShard)
	return s
}

// The labels follow a real Redis Cluster: they match ROLE within one
// interval, flip at a real CLUSTER FAILOVER, a failover that leaves two
// masters on one node is reported (metric, Events, `regosched audit`), and
// a recreated replica is scheduled under its remembered role.
func TestRedisRolesFollowARealCluster(t *testing.T) {
	const ns = "e2e-redis-roles"
	ctx := setup(t, ns)
	n := nodes(t, ctx, 8)
	cluster, err := localredis.StartCluster(ctx, localredis.Options{Dir: t.TempDir()}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	s := placeSessions(t, ctx, ns, cluster, n)
	name, replicaOf, placement, want := s.name, s.replicaOf, s.nodeOf, s.want
	a, b, c := s.masters[0], s.masters[1], s.masters[2]
	t.Logf("labels matched ROLE %v after the pods ran", s.took.Round(time.Millisecond))

	// A real failover moves shard B's master onto n[0], beside master A.
	failoverAt := time.Now()
	if err := cluster.Failover(ctx, replicaOf[b]); err != nil {
		t.Fatal(err)
	}
	want[name(replicaOf[b])], want[name(b)] = "master", "replica"
	sameShard := map[string]string{name(b): name(replicaOf[b]), name(replicaOf[a]): name(a), name(replicaOf[c]): name(c)}
	waitRoles(t, ctx, ns, want, sameShard)
	t.Logf("labels flipped %v after CLUSTER FAILOVER was sent", time.Since(failoverAt).Round(time.Millisecond))

	t.Run("the violation is reported", func(t *testing.T) {
		sample := fmt.Sprintf("regosched_violations{namespace=%q,rule=\"redis-masters\"}", ns)
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
			v, err := stack.Sample(ctx, sample)
			return err == nil && v == 1, nil
		})
		if err != nil {
			t.Errorf("%s never became 1", sample)
		}
		for _, pod := range []string{name(a), name(replicaOf[b])} {
			if !hasWarning(ctx, ns, pod, "PlacementViolation", "redis-masters") {
				t.Errorf("no Warning PlacementViolation event naming redis-masters on %s", pod)
			}
		}
		if t.Failed() {
			if list, err := stack.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, e := range list.Items {
					t.Logf("event %s %s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
				}
			}
		}
		out, code := runBinary(t, ctx, "audit", "--kubeconfig", stack.Cluster().KubeconfigPath())
		if code != 1 {
			t.Errorf("regosched audit exited %d, want 1:\n%s", code, out)
		}
		for _, w := range []string{"redis-masters", ns, n[0], name(a), name(replicaOf[b])} {
			if !strings.Contains(out, w) {
				t.Errorf("regosched audit output lacks %q:\n%s", w, out)
			}
		}
		t.Logf("regosched audit:\n%s", out)
	})

	t.Run("a recreated replica keeps its role", func(t *testing.T) {
		// Shard C's replica is deleted and comes back under its name, not
		// yet running: its labels are gone, Redis cannot be asked. Offered
		// its master's node and the node of shard A's replica, it must take
		// the latter: as a replica it may share a node with another
		// shard's replica, never with its own master (as an unknown pod it
		// could take neither).
		replica := name(replicaOf[c])
		deletePod(t, ctx, ns, replica)
		pod := ls.BitnamiClusterPod(ns, replica, replicaOf[c]).OnNodes(placement[c], placement[replicaOf[a]]).Obj()
		got := place(t, ctx, pod)
		if got != placement[replicaOf[a]] {
			t.Errorf("recreated replica bound to %s, want %s (its master is on %s)", got, placement[replicaOf[a]], placement[c])
		}
		p, err := stack.Client().CoreV1().Pods(ns).Get(ctx, replica, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("recreated pod: %s=%s %s=%s, source %q", labelRole, p.Labels[labelRole], labelShard, p.Labels[labelShard], p.Annotations["regosched.io/role-source"])
		running(t, ctx, ns, replica)
		waitRoles(t, ctx, ns, map[string]string{replica: "replica"}, map[string]string{replica: name(c)})
	})
}

// Bitnami's Sentinel pods carry isMaster, which the chart's own scripts
// change at failover: a master is kept off another master's node.
func TestSentinelIsMasterPods(t *testing.T) {
	const ns = "e2e-sentinel"
	ctx := setup(t, ns)
	n := nodes(t, ctx, 2)
	sentinel := map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "node"}
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-node-0").Labels(sentinel).StatefulSetPodName().Label("isMaster", "true").
		Schedulable().OnNodes(n[0]).Obj())
	replica := fixture.MakePod().Namespace(ns).Name("cache-node-1").Labels(sentinel).StatefulSetPodName().Label("isMaster", "false").
		Schedulable().OnNodes(n...).Obj()
	if got := place(t, ctx, replica); got != n[1] {
		t.Errorf("the replica went to %s, want %s, away from its master", got, n[1])
	}
	deletePod(t, ctx, ns, "cache-node-1")
	reason := refuse(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-node-2").Labels(sentinel).StatefulSetPodName().Label("isMaster", "true").
		Schedulable().OnNodes(n[0]).Obj())
	if !strings.Contains(reason, "cache-node-0") {
		t.Errorf("FailedScheduling %q does not name the master already there", reason)
	}
}

// ECK labels data tiers on their own (node-data is false on a hot-tier
// pod): hot data pods of one cluster are kept apart.
func TestECKHotTierDataPodsApart(t *testing.T) {
	const ns = "e2e-eck-tiers"
	ctx := setup(t, ns)
	n := nodes(t, ctx, 2)
	hot := map[string]string{
		"elasticsearch.k8s.elastic.co/cluster-name": "logs", "elasticsearch.k8s.elastic.co/node-data": "false",
		"elasticsearch.k8s.elastic.co/node-data_hot": "true", "elasticsearch.k8s.elastic.co/node-master": "false",
		"elasticsearch.k8s.elastic.co/statefulset-name": "logs-es-hot",
	}
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("logs-es-hot-0").Labels(hot).Schedulable().OnNodes(n[0]).Obj())
	if got := place(t, ctx, fixture.MakePod().Namespace(ns).Name("logs-es-hot-1").Labels(hot).Schedulable().OnNodes(n...).Obj()); got != n[1] {
		t.Errorf("the second hot data pod went to %s, want %s", got, n[1])
	}
}

// A bundle whose data misspells a key is refused by the real binary with
// the key named, before anything is decided with it.
func TestMisspeltDataKeyRefused(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	src := filepath.Join(stack.RepoRoot(), "rego")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	dataFile := filepath.Join(dir, "regosched", "config", "data.json")
	raw, err := os.ReadFile(dataFile)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	data["zone_lable"] = data["zone_label"]
	delete(data, "zone_label")
	raw, err = json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dataFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runBinary(t, ctx, "audit", "--kubeconfig", stack.Cluster().KubeconfigPath(), "--policy", dir)
	if code == 0 || code == 1 {
		t.Fatalf("regosched audit with a misspelt key exited %d, want an error:\n%s", code, out)
	}
	if !strings.Contains(out, "Additional property zone_lable is not allowed") {
		t.Errorf("the error does not name the misspelt key:\n%s", out)
	}
}

// runBinary runs the stack's regosched binary; it returns its combined
// output and exit code.
func runBinary(t *testing.T, ctx context.Context, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, stack.Binary(), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("running regosched %v: %v", args, err)
		return "", -1
	}
}

// hasWarning reports whether pod has a Warning event with reason whose
// message names rule.
func hasWarning(ctx context.Context, ns, pod, reason, rule string) bool {
	found := false
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
		core, err := stack.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err == nil {
			for _, e := range core.Items {
				if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Message, rule) {
					found = true
				}
			}
		}
		events, err := stack.Client().EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
		if err == nil {
			for _, e := range events.Items {
				if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Note, rule) {
					found = true
				}
			}
		}
		return found, nil
	})
	return found
}
