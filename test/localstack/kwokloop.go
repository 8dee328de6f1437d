package localstack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/test/localcluster"
)

// EvictionLoop configures RunEvictionLoop.
type EvictionLoop struct {
	// Client is an admin client of a cluster whose kube-controller-manager
	// runs the disruption and statefulset controllers, and whose scheduler
	// serves SchedulerName with regosched's rules.
	Client kubernetes.Interface
	// Kwok runs the loop's two nodes, which RunEvictionLoop creates and
	// deletes.
	Kwok *localcluster.Kwok
	// Namespace exists and holds nothing else of the loop's.
	Namespace string
	// Dir receives the redis-servers' folders (t.TempDir()).
	Dir string
	// Regosched is the regosched binary and Kubeconfig its kubeconfig, for
	// `regosched audit`.
	Regosched, Kubeconfig string
	// StartRepair starts the regosched that repairs (--redis-roles and
	// --repair=on) once the violation stands, and returns the base URL of
	// its /metrics; the caller stops it.
	StartRepair func(ctx context.Context, sc EvictionScene) (metricsURL string, err error)
	// Timeout bounds each wait; loopTimeout when 0.
	Timeout time.Duration
	// Log receives PodRedis's messages (Logf when nil); Logf a line per
	// step (t.Logf).
	Log  logrus.FieldLogger
	Logf func(format string, args ...any)
}

// loopTimeout bounds each wait of the loop: every step takes seconds; the
// rest is margin for a busy machine.
const loopTimeout = 2 * time.Minute

// EvictionScene is the loop's setting: a StatefulSet Set of Bitnami's
// redis-cluster chart whose two pods, Master and Replica of one shard,
// both stand on Nodes[0] (zone-a); Nodes[1] (zone-b) is empty.
type EvictionScene struct {
	Namespace, Set, Master, Replica string
	Nodes                           [2]string
}

// EvictionResult is what RunEvictionLoop saw. Durations count from
// StartRepair's return.
type EvictionResult struct {
	EvictionScene
	// Landed is the node of the replica's last incarnation; OldIP and
	// NewIP its first and last pod IPs.
	Landed, OldIP, NewIP string
	// Evictions counts the replica's incarnations the Eviction API deleted
	// (their DisruptionTarget condition says so).
	Evictions int
	// Budgeted is true when the PodDisruptionBudget's status listed the
	// replica in disruptedPods: the eviction went through it.
	Budgeted bool
	// BoundRole is the last incarnation's role labels, and their source,
	// when it was bound: what regosched's recall wrote ("remembered")
	// before the scheduler bound it, or "/ ()" when nothing had.
	BoundRole string
	// ReplicaRole is the replica's roleOf in the end.
	ReplicaRole string
	// Repaired is the repairing regosched's evictions counted repaired.
	Repaired                                           int
	Evicted, Bound, Running, Joined, Relabelled, Clean time.Duration
}

// String is one line for a test log.
func (r EvictionResult) String() string {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("%d eviction(s) (budgeted %v), %d repaired; the replica %s moved from %s (%s) to %s (%s), labels %q when bound, %q in the end; "+
		"after the repairer started: evicted %s, bound %s, running %s, in its shard %s, relabelled %s, audit clean %s",
		r.Evictions, r.Budgeted, r.Repaired, r.Replica, r.Nodes[0], r.OldIP, r.Landed, r.NewIP, r.BoundRole, r.ReplicaRole,
		ms(r.Evicted), ms(r.Bound), ms(r.Running), ms(r.Joined), ms(r.Relabelled), ms(r.Clean))
}

// Problems are what a whole loop must not show, in both builds: other than
// one eviction through the budget, counted repaired, leaving the replica
// on the other node with another IP.
func (r EvictionResult) Problems() []string {
	var out []string
	if r.Evictions != 1 || r.Repaired != 1 {
		out = append(out, fmt.Sprintf("%d evictions, %d counted repaired; want 1 each", r.Evictions, r.Repaired))
	}
	if !r.Budgeted {
		out = append(out, "the PodDisruptionBudget never listed the replica as disrupted: the eviction did not go through it")
	}
	if r.Landed != r.Nodes[1] || r.NewIP == r.OldIP {
		out = append(out, fmt.Sprintf("the recreated replica runs on %s at %s, want %s and another IP than %s", r.Landed, r.NewIP, r.Nodes[1], r.OldIP))
	}
	return out
}

// RunEvictionLoop runs the whole eviction loop on two kwok nodes: a
// StatefulSet's Redis master and its own replica (real redis-servers on
// the pods' IPs, PodRedis) stand on one node, placed there by the set's
// first revision (spec.nodeName), before regosched ran; its second
// revision (OnDelete: no pod is replaced by the change) leaves placement
// to the scheduler. Then StartRepair starts the repairing regosched, and
// RunEvictionLoop waits for the replica's eviction through the Eviction
// API under the set's PodDisruptionBudget, kwok completing it, the
// statefulset-controller recreating the pod, the scheduler placing it,
// kwok running it with a new IP, its new redis-server rejoining the shard,
// redis-roles relabelling it, and `regosched audit` finding nothing. It
// deletes what it created before returning.
func RunEvictionLoop(ctx context.Context, l EvictionLoop) (EvictionResult, error) {
	timeout := l.Timeout
	if timeout == 0 {
		timeout = loopTimeout
	}
	logf := l.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if l.Log == nil {
		lg := logrus.New()
		lg.SetOutput(logfWriter(logf))
		l.Log = lg
	}
	run := strconv.FormatInt(time.Now().UnixNano()%1e8, 36)
	release := "kwok-" + run
	set := release + "-redis-cluster"
	sc := EvictionScene{Namespace: l.Namespace, Set: set, Master: set + "-0", Replica: set + "-1",
		Nodes: [2]string{"node-kwok-" + run + "-a", "node-kwok-" + run + "-b"}}
	res := EvictionResult{EvictionScene: sc}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := watchLoop(ctx, l.Client, l.Namespace)
	if err != nil {
		return res, err
	}
	if err := l.Kwok.AddNodes(ctx, sc.Nodes[:], []string{"zone-a", "zone-b"}); err != nil {
		return res, err
	}
	defer l.cleanup(sc, logf)
	port, err := PickPodRedisPort()
	if err != nil {
		return res, err
	}
	podLabels := bitnamiLabels(release)
	sets := l.Client.AppsV1().StatefulSets(l.Namespace)
	if _, err := sets.Create(ctx, evictionSet(l.Namespace, set, podLabels, port, sc.Nodes[0]), metav1.CreateOptions{}); err != nil {
		return res, fmt.Errorf("creating StatefulSet %s: %w", set, err)
	}
	if _, err := l.Client.PolicyV1().PodDisruptionBudgets(l.Namespace).Create(ctx, evictionBudget(l.Namespace, set, podLabels), metav1.CreateOptions{}); err != nil {
		return res, fmt.Errorf("creating PodDisruptionBudget %s: %w", set, err)
	}
	poll := func(what string, cond func(ctx context.Context) (bool, error)) error {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, cond); err != nil {
			return fmt.Errorf("waiting %s for %s: %w", timeout, what, err)
		}
		return nil
	}
	pods := l.Client.CoreV1().Pods(l.Namespace)
	var first map[string]corev1.Pod
	if err := poll("both pods running on "+sc.Nodes[0], func(ctx context.Context) (bool, error) {
		first, err = runningPods(ctx, pods, set)
		return err == nil && len(first) == 2 && first[sc.Master].Spec.NodeName == sc.Nodes[0] && first[sc.Replica].Spec.NodeName == sc.Nodes[0], nil
	}); err != nil {
		return res, err
	}
	replicaUID := first[sc.Replica].UID
	res.OldIP = first[sc.Replica].Status.PodIP
	pr, err := NewPodRedis(l.Client, l.Namespace, labels.SelectorFromSet(podLabels).String(), l.Dir, l.Log)
	if err != nil {
		return res, err
	}
	prCtx, prCancel := context.WithCancel(ctx)
	prDone := make(chan struct{})
	go func() {
		defer close(prDone)
		pr.Run(prCtx)
	}()
	// Run ends before Stop, so that no server starts after the last stops.
	defer func() {
		prCancel()
		<-prDone
		pr.Stop()
	}()
	if err := poll("the replica's redis-server to replicate its master", func(ctx context.Context) (bool, error) {
		return pr.Replicating(ctx, replicaUID), pr.Err()
	}); err != nil {
		return res, err
	}
	logf("%s and %s run on %s (pod IPs %s, %s; node IP %s), Redis master and its replica", sc.Master, sc.Replica, sc.Nodes[0],
		first[sc.Master].Status.PodIP, res.OldIP, l.Kwok.NodeIP)

	unpin := []byte(`{"spec":{"template":{"spec":{"nodeName":null}}}}`)
	if _, err := sets.Patch(ctx, set, types.MergePatchType, unpin, metav1.PatchOptions{}); err != nil {
		return res, fmt.Errorf("leaving placement to the scheduler: %w", err)
	}
	if err := poll("the statefulset-controller to take the new revision and the budget to allow one disruption", func(ctx context.Context) (bool, error) {
		s, err := sets.Get(ctx, set, metav1.GetOptions{})
		if err != nil || s.Status.ObservedGeneration < s.Generation || s.Status.UpdateRevision == s.Status.CurrentRevision {
			return false, nil
		}
		b, err := l.Client.PolicyV1().PodDisruptionBudgets(l.Namespace).Get(ctx, set, metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.DisruptionsAllowed == 1, nil
	}); err != nil {
		return res, err
	}

	metricsURL, err := l.StartRepair(ctx, sc)
	if err != nil {
		return res, err
	}
	start := time.Now()
	logf("the repairing regosched runs: waiting for the eviction loop")
	var last string
	err = poll("the whole loop", func(ctx context.Context) (bool, error) {
		if err := pr.Err(); err != nil {
			return false, err
		}
		now, err := l.loopDone(ctx, w, pr, sc, replicaUID, start, &res)
		if ctx.Err() != nil {
			return false, nil // what was awaited before the deadline tells more
		}
		if last = now; last != "" || err != nil {
			return false, err
		}
		// The repairer counts the repair once its next audit pass sees
		// the violation gone.
		res.Repaired, err = repairedEvictions(ctx, metricsURL)
		if err != nil || res.Repaired == 0 {
			last = fmt.Sprintf("the repairer to count the eviction repaired (%v)", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return res, fmt.Errorf("%w; last: %s", err, last)
	}
	return res, nil
}

// loopDone says what the loop still waits for ("" when done), and fills
// res with what it has seen.
func (l EvictionLoop) loopDone(ctx context.Context, w *loopWatch, pr *PodRedis, sc EvictionScene, oldUID types.UID, start time.Time, res *EvictionResult) (string, error) {
	since := func(t time.Time) time.Duration { return t.Sub(start) }
	res.Evictions = 0
	var lastUID types.UID
	var lastSeen podSeen
	for uid, s := range w.incarnations(sc.Replica) {
		if !s.evicted.IsZero() {
			res.Evictions++
			if uid == oldUID {
				res.Evicted = since(s.evicted)
			}
		}
		if s.gone.IsZero() && s.deleting.IsZero() && s.created.After(lastSeen.created) {
			lastUID, lastSeen = uid, s
		}
	}
	_, res.Budgeted = w.disruptedAt(sc.Replica)
	if res.Evictions == 0 {
		return "the replica's eviction", nil
	}
	if lastUID == "" || lastUID == oldUID || lastSeen.running.IsZero() {
		return "the recreated replica to run", nil
	}
	res.Landed, res.NewIP, res.BoundRole = lastSeen.node, lastSeen.ip, lastSeen.boundRole
	res.Bound, res.Running = since(lastSeen.bound), since(lastSeen.running)
	if !pr.Replicating(ctx, lastUID) {
		return "the recreated replica's redis-server to replicate its master", nil
	}
	if res.Joined == 0 {
		res.Joined = time.Since(start)
	}
	roles, err := podRoles(ctx, l.Client, l.Namespace, sc.Set)
	if err != nil {
		return err.Error(), nil
	}
	// A live role equal to the remembered one leaves the labels as they
	// are and sets the source annotation to redis; the CLUSTER NODES on the
	// new server after the join shows that the read was of that server.
	res.ReplicaRole = roles[sc.Replica]
	if !strings.HasPrefix(roles[sc.Master], "master/slot-0 ") || res.ReplicaRole != "replica/slot-0 (redis)" {
		return fmt.Sprintf("role labels master/slot-0 and replica/slot-0 (redis), have %v", roles), nil
	}
	if !pr.AskedSinceJoin(ctx, lastUID) {
		return "redis-roles to read the recreated replica's role from its Redis", nil
	}
	if res.Relabelled == 0 {
		res.Relabelled = time.Since(start)
	}
	found, err := auditNamespace(ctx, l.Regosched, l.Kubeconfig, l.Namespace)
	if err != nil {
		return "", err
	}
	list, err := l.Client.CoreV1().Pods(l.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error(), nil
	}
	found = append(found, Violations(list.Items)...)
	if len(found) > 0 {
		return "no violation, by regosched audit and the independent check: " + strings.Join(found, "; "), nil
	}
	res.Clean = time.Since(start)
	return "", nil
}

// cleanup deletes the loop's StatefulSet (first, so that nothing is
// recreated), its budget, pods and nodes, whatever ctx the loop ended in.
func (l EvictionLoop) cleanup(sc EvictionScene, logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gone := func(err error) error {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	zero := int64(0)
	errs := []error{
		gone(l.Client.AppsV1().StatefulSets(l.Namespace).Delete(ctx, sc.Set, metav1.DeleteOptions{})),
		gone(l.Client.PolicyV1().PodDisruptionBudgets(l.Namespace).Delete(ctx, sc.Set, metav1.DeleteOptions{})),
		gone(l.Client.CoreV1().Pods(l.Namespace).Delete(ctx, sc.Master, metav1.DeleteOptions{GracePeriodSeconds: &zero})),
		gone(l.Client.CoreV1().Pods(l.Namespace).Delete(ctx, sc.Replica, metav1.DeleteOptions{GracePeriodSeconds: &zero})),
		l.Kwok.DeleteNodes(ctx, sc.Nodes[:]...),
	}
	if err := errors.Join(errs...); err != nil {
		logf("clean-up of the eviction loop: %v", err)
	}
}

// logfWriter sends log lines to a test's Logf.
type logfWriter func(format string, args ...any)

func (w logfWriter) Write(p []byte) (int, error) {
	w("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
