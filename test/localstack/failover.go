package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localcluster"
)

// FailoverElection is the leader election of the failover tests'
// schedulers: a Lease of their own in kube-system, and periods short enough
// (4 s, 3 s, 1 s) that a take-over after a crash takes seconds.
func FailoverElection(lease string) localcluster.LeaderElection {
	return localcluster.LeaderElection{
		ResourceNamespace: metav1.NamespaceSystem,
		ResourceName:      lease,
		LeaseDuration:     4 * time.Second,
		RenewDeadline:     3 * time.Second,
		RetryPeriod:       time.Second,
	}
}

// acquiredLine is what client-go's leader election logs (at any -v) when a
// process takes its Lease.
const acquiredLine = "Successfully acquired lease"

// FailoverShards and FailoverDataPods size FailoverPods' clusters so that
// every pod fits whatever was placed before it on 8 nodes: a master needs a
// node without the other 3 masters and its replica, a data pod one without
// the other 5, so no placement order leads to a dead end (see the burst
// tests' deadEnd) and a pending pod is the scheduler's doing alone.
const (
	FailoverShards   = 4
	FailoverDataPods = 6
)

// FailoverPods is a burst with rules on nodes (at least 8): redis Redis
// clusters of FailoverShards shards, a master and a replica each; es
// Elasticsearch clusters of FailoverDataPods data pods; plain pods no rule
// concerns. Pods are interleaved cluster by cluster, so that every part of
// the burst has pods of every kind.
func FailoverPods(ns string, nodes []string, redis, es, plain int) []*corev1.Pod {
	var pods []*corev1.Pod
	for c := range max(redis, es, plain) {
		if c < redis {
			cluster := fmt.Sprintf("cache-%d", c)
			for sh := range FailoverShards {
				shard := fmt.Sprint(sh)
				pods = append(pods,
					fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d-master", cluster, sh)).Redis(cluster, "master", shard).
						Schedulable().OnNodes(nodes...).Obj(),
					fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d-replica", cluster, sh)).Redis(cluster, "replica", shard).
						Schedulable().OnNodes(nodes...).Obj())
			}
		}
		if c < es {
			cluster := fmt.Sprintf("logs-%d", c)
			for i := range FailoverDataPods {
				pods = append(pods, fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-data-%d", cluster, i)).Elasticsearch(cluster, "data").
					Schedulable().OnNodes(nodes...).Obj())
			}
		}
		if c < plain {
			pods = append(pods, fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("plain-%d", c)).Schedulable().OnNodes(nodes...).Obj())
		}
	}
	return pods
}

// Failover configures RunFailover.
type Failover struct {
	// Client is an admin client of the cluster the group schedules for.
	Client kubernetes.Interface
	// Group is the schedulers: the leader is killed, another takes over.
	Group *localcluster.SchedulerGroup
	// Namespace holds Pods, and nothing else while RunFailover runs.
	Namespace string
	Pods      []*corev1.Pod
	// KillAfter is the number of pods bound when the leader is killed:
	// more than 0 and fewer than len(Pods), so that the kill comes
	// mid-burst.
	KillAfter int
	// TakeoverTimeout bounds the waits for a leader, first and next;
	// BindTimeout the wait for the last binding after the take-over.
	TakeoverTimeout time.Duration
	BindTimeout     time.Duration
	// Logf receives progress lines (a test's t.Logf).
	Logf func(format string, args ...any)
}

// FailoverResult is what RunFailover saw. Durations count from the kill.
type FailoverResult struct {
	Pods int
	// Killed and Successor are the process names of the leader killed
	// and of the one that took over.
	Killed, Successor string
	// BoundAtKill is the number of pods bound when the leader was killed.
	BoundAtKill int
	// BoundInFlight is the number seen bound after the kill but before the
	// successor took the Lease: bindings the dead leader had sent, some
	// already made but not yet seen through the watch at the kill.
	BoundInFlight int
	// LeaseTaken is when the successor took the Lease (its acquireTime).
	LeaseTaken time.Duration
	// FirstBind is the first binding after the successor took the Lease:
	// the take-over time as a workload sees it.
	FirstBind time.Duration
	// AllBound is when the last pod was bound.
	AllBound time.Duration
	// Violations are the rules broken among Pods, by Violations.
	Violations []string
}

// String is one line for a test log.
func (r FailoverResult) String() string {
	return fmt.Sprintf("%d pods, %d seen bound when %s was killed, %d more before the take-over; %s took the Lease after %s, "+
		"its first binding after %s, all bound after %s; %d violations",
		r.Pods, r.BoundAtKill, r.Killed, r.BoundInFlight, r.Successor, r.LeaseTaken.Round(time.Millisecond),
		r.FirstBind.Round(time.Millisecond), r.AllBound.Round(time.Millisecond), len(r.Violations))
}

// RunFailover waits for the group's leader, creates f.Pods at once, kills
// the leader with SIGKILL (no Lease release) once f.KillAfter pods are
// bound, waits for another process to take the Lease and for every pod to
// be bound, and returns what it saw, the rules broken included. It fails
// when the kill did not come mid-burst, when no process takes over, when a
// pod stays pending, or when the successor's log does not say it took the
// Lease (which would mean the Lease names another process than it seems).
func RunFailover(ctx context.Context, f Failover) (FailoverResult, error) {
	res := FailoverResult{Pods: len(f.Pods)}
	if f.KillAfter < 1 || f.KillAfter >= len(f.Pods) {
		return res, fmt.Errorf("failover: KillAfter %d is not mid-burst for %d pods", f.KillAfter, len(f.Pods))
	}
	logf := f.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec, err := recordBindings(ctx, f.Client, f.Namespace, f.KillAfter)
	if err != nil {
		return res, err
	}
	leader, err := f.Group.WaitHolder(ctx, f.TakeoverTimeout, func(h localcluster.LeaseHolder) bool { return h.Process != nil })
	if err != nil {
		return res, err
	}
	res.Killed = leader.Process.Name
	logf("leader before the burst: %s", leader)

	created := make(chan error, 1)
	go func() {
		// One goroutine per pod, a few at a time: the creates race each
		// other and the scheduler.
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for _, p := range f.Pods {
			g.Go(func() error {
				if _, err := f.Client.CoreV1().Pods(f.Namespace).Create(gctx, p, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating pod %s/%s: %w", f.Namespace, p.Name, err)
				}
				return nil
			})
		}
		created <- g.Wait()
	}()

	createDone := false
	select {
	case <-rec.reached:
	case err := <-created:
		if err != nil {
			return res, err
		}
		createDone = true
		select {
		case <-rec.reached:
		case <-time.After(f.BindTimeout):
			return res, fmt.Errorf("failover: %d of %d pods bound after %s, want %d before the kill", rec.count(), len(f.Pods), f.BindTimeout, f.KillAfter)
		}
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.BoundAtKill = rec.count()
	killed := time.Now()
	leader.Process.Kill()
	logf("SIGKILL of %s with %d of %d pods bound", res.Killed, res.BoundAtKill, len(f.Pods))
	if res.BoundAtKill >= len(f.Pods) {
		return res, fmt.Errorf("failover: all %d pods were bound before the kill: make the burst larger or KillAfter smaller", len(f.Pods))
	}
	if !createDone {
		if err := <-created; err != nil {
			return res, err
		}
	}

	next, err := f.Group.WaitHolder(ctx, f.TakeoverTimeout, func(h localcluster.LeaseHolder) bool {
		return h.Process != nil && h.Process != leader.Process
	})
	if err != nil {
		return res, err
	}
	res.Successor = next.Process.Name
	res.LeaseTaken = next.AcquireTime.Sub(killed)
	log, err := os.ReadFile(next.Process.LogPath)
	if err != nil {
		return res, fmt.Errorf("failover: reading the log of %s: %w", next.Process.Name, err)
	}
	if !strings.Contains(string(log), acquiredLine) {
		return res, fmt.Errorf("failover: the Lease names %s, whose log does not say %q", next, acquiredLine)
	}

	var pending []string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, f.BindTimeout, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		list, err := f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // the API server may be busy; ask again
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				pending = append(pending, p.Name)
			}
		}
		return len(list.Items) == len(f.Pods) && len(pending) == 0 && rec.count() == len(f.Pods), nil
	})
	if err != nil {
		return res, fmt.Errorf("failover: %d pods still pending %s after the take-over (%s): %w",
			len(pending), f.BindTimeout, strings.Join(pending, ", "), err)
	}

	times := rec.times()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for _, at := range times {
		switch {
		case at.Before(killed):
		case at.Before(next.AcquireTime):
			res.BoundInFlight++
		case res.FirstBind == 0:
			res.FirstBind = at.Sub(killed)
		}
	}
	res.AllBound = times[len(times)-1].Sub(killed)

	list, err := f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, fmt.Errorf("failover: listing pods of %s: %w", f.Namespace, err)
	}
	res.Violations = Violations(list.Items)
	return res, nil
}

// bindings records when each pod of a namespace was first seen bound.
type bindings struct {
	mu      sync.Mutex
	at      map[string]time.Time
	target  int           // closes reached once this many are bound
	reached chan struct{} // closed once target pods are bound
}

// recordBindings watches the pods of ns until ctx ends and records when
// each is first seen bound, in this process's clock.
func recordBindings(ctx context.Context, client kubernetes.Interface, ns string, target int) (*bindings, error) {
	b := &bindings{at: map[string]time.Time{}, target: target, reached: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	seen := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			b.bound(p.Name, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching pods of %s: %w", ns, err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watching pods of %s: %v not synced: %w", ns, typ, errors.Join(ctx.Err(), errors.New("cache sync failed")))
		}
	}
	return b, nil
}

func (b *bindings) bound(name string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.at[name]; ok {
		return
	}
	b.at[name] = at
	if len(b.at) == b.target {
		close(b.reached)
	}
}

func (b *bindings) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.at)
}

func (b *bindings) times() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]time.Time, 0, len(b.at))
	for _, at := range b.at {
		out = append(out, at)
	}
	return out
}
