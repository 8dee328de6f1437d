package repair

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/test/fixture"
)

// The evictions of pods without a live role: only what a
// PodDisruptionBudget covers and allows, and only what a controller
// recreates.
func TestEvictionNeedsABudget(t *testing.T) {
	tests := []struct {
		name        string
		objs        []runtime.Object
		refuse      bool
		wantEvicted []string
		wantWhy     string
	}{
		{
			name: "no PodDisruptionBudget: plan only",
			objs: []runtime.Object{
				fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
			},
			wantWhy: "no PodDisruptionBudget covers it",
		},
		{
			name: "a budget of other pods",
			objs: []runtime.Object{
				fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				pdb(map[string]string{"app": "other"}),
			},
			wantWhy: "no PodDisruptionBudget covers it",
		},
		{
			name: "the budget forbids it now",
			objs: []runtime.Object{
				fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				pdb(map[string]string{"app.kubernetes.io/name": "elasticsearch"}),
			},
			refuse:  true,
			wantWhy: "would refuse its eviction now",
		},
		{
			name: "no controller recreates it",
			objs: []runtime.Object{
				fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Obj(),
				fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Node("node-1").Obj(),
				pdb(map[string]string{"app.kubernetes.io/name": "elasticsearch"}),
			},
			wantWhy: "no controller owns it",
		},
		{
			name: "the budget allows it: one pod is evicted, the later one",
			objs: []runtime.Object{
				fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				pdb(map[string]string{"app.kubernetes.io/name": "elasticsearch"}),
			},
			wantEvicted: []string{"logs/es-data-1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newHarness(t, append(tc.objs, fixture.MakeNode().Name("node-1").Obj(), fixture.MakeNode().Name("node-2").Obj())...)
			f.refuse = tc.refuse
			r := f.repairer(t, On)
			report := f.pass(t, r)
			if len(report.Violations) != 1 {
				t.Fatalf("audit found %v, want one violation", report.Violations)
			}
			evicted, _ := f.evictions()
			if diff := cmp.Diff(tc.wantEvicted, evicted); diff != "" {
				t.Errorf("evicted (-want +got):\n%s", diff)
			}
			if tc.wantWhy != "" {
				if !f.recorder.has(ReasonPlanned, tc.wantWhy) {
					t.Errorf("no RepairPlanned event saying %q; events: %v", tc.wantWhy, f.recorder.events)
				}
				if got := count(r, None, OutcomeRefused); got != 1 {
					t.Errorf("refused = %v, want 1", got)
				}
				if st := f.state(t); st.InFlight != nil {
					t.Errorf("a repair is in flight: %+v", st.InFlight)
				}
			}
		})
	}
}

// An eviction is written down before it is sent, followed up by the next
// passes, and ends Repaired once its violation is gone; a new leader (a
// Repairer with no memory) follows it up as well, and sends nothing twice.
func TestEvictionLifecycle(t *testing.T) {
	f := newHarness(t,
		fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
		fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
		fixture.MakePod().Namespace("logs").Name("es-data-2").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-2").Obj(),
		fixture.MakePod().Namespace("logs").Name("es-data-3").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-2").Obj(),
		pdb(map[string]string{"app.kubernetes.io/name": "elasticsearch"}),
		fixture.MakeNode().Name("node-1").Obj(),
		fixture.MakeNode().Name("node-2").Obj(),
	)
	first := f.repairer(t, On)
	f.pass(t, first)
	evicted, _ := f.evictions()
	if diff := cmp.Diff([]string{"logs/es-data-1"}, evicted); diff != "" {
		t.Fatalf("evicted (-want +got):\n%s", diff)
	}
	st := f.state(t)
	if st.InFlight == nil || st.InFlight.Target != "logs/es-data-1" || st.InFlight.Action != Evict {
		t.Fatalf("in flight = %+v, want the eviction of logs/es-data-1", st.InFlight)
	}
	if got := count(first, Evict, OutcomeStarted); got != 1 {
		t.Errorf("started = %v, want 1", got)
	}

	// The leader dies; the next one starts with no memory. One repair at
	// a time: node-2's violation waits while the first is in flight.
	f.waitGone(t, "uid-es-data-1")
	f.reg = prometheus.NewRegistry()
	next := f.repairer(t, On)
	f.now = f.now.Add(10 * time.Second)
	f.pass(t, next)
	if got := count(next, Evict, OutcomeRepaired); got != 1 {
		t.Errorf("repaired = %v, want 1", got)
	}
	if !f.recorder.has(ReasonRepaired, "cleared the violation") {
		t.Errorf("no Repaired event; events: %v", f.recorder.events)
	}
	evicted, _ = f.evictions()
	if diff := cmp.Diff([]string{"logs/es-data-1"}, evicted); diff != "" {
		t.Errorf("evicted while following up (-want +got):\n%s", diff)
	}
	st = f.state(t)
	if st.InFlight != nil || len(st.Done) != 1 || st.Done[0].Outcome != OutcomeRepaired {
		t.Fatalf("state = in flight %+v, done %+v; want nothing in flight and one repair done", st.InFlight, st.Done)
	}

	// Then node-2's violation is repaired by the next pass.
	f.now = f.now.Add(10 * time.Second)
	f.pass(t, next)
	evicted, _ = f.evictions()
	if diff := cmp.Diff([]string{"logs/es-data-1", "logs/es-data-3"}, evicted); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
}

// A repair whose violation outlives the timeout is given up, reported and
// backed off; plan mode acts on nothing and writes nothing.
func TestTimeoutAndPlanMode(t *testing.T) {
	objs := []runtime.Object{
		fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
		fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
		pdb(map[string]string{"app.kubernetes.io/name": "elasticsearch"}),
		fixture.MakeNode().Name("node-1").Obj(),
	}
	t.Run("plan", func(t *testing.T) {
		f := newHarness(t, objs...)
		r := f.repairer(t, Plan)
		f.pass(t, r)
		f.pass(t, r)
		evicted, dryRuns := f.evictions()
		if len(evicted) != 0 || len(dryRuns) == 0 {
			t.Errorf("plan mode evicted %v (dry runs %v), want only dry runs", evicted, dryRuns)
		}
		if !f.recorder.has(ReasonPlanned, "would evict logs/es-data-1") {
			t.Errorf("no RepairPlanned event; events: %v", f.recorder.events)
		}
		if got := count(r, Evict, OutcomePlanned); got != 1 {
			t.Errorf("planned = %v, want 1 (a lasting plan is counted once)", got)
		}
		if _, err := f.client.CoreV1().ConfigMaps(stateNS).Get(context.Background(), DefaultConfigMap, metav1.GetOptions{}); err == nil {
			t.Error("plan mode wrote the state ConfigMap")
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := newHarness(t, objs...)
		r := f.repairer(t, On)
		f.pass(t, r)
		f.waitGone(t, "uid-es-data-1")
		// The pod comes back at once under its name on the same node, as
		// if its controller and a scheduler without regosched put it there.
		back := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj()
		back.UID = "uid-es-data-1-again"
		if _, err := f.client.CoreV1().Pods("logs").Create(context.Background(), back, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitCached(t, f, back)
		f.now = f.now.Add(2 * time.Minute)
		f.pass(t, r)
		if got := count(r, Evict, OutcomeFailed); got != 1 {
			t.Errorf("failed = %v, want 1", got)
		}
		if !f.recorder.has(ReasonFailed, "outlived the 1m0s timeout") {
			t.Errorf("no RepairFailed event; events: %v", f.recorder.events)
		}
		st := f.state(t)
		if b := st.Backoff["elasticsearch/logs/es"]; b.Failures != 1 || !b.Until.After(f.now) {
			t.Errorf("backoff = %+v, want one failure, until after %s", st.Backoff, f.now)
		}
		// Backing off: nothing more is evicted.
		f.now = f.now.Add(10 * time.Second)
		f.pass(t, r)
		if evicted, _ := f.evictions(); len(evicted) != 1 {
			t.Errorf("evicted %v while backing off, want the one eviction", evicted)
		}
	})
}

// Redis pods: a role that is not known, or that Redis cannot confirm,
// stops every action; a master is never the one evicted.
func TestRedisNeedsFacts(t *testing.T) {
	tests := []struct {
		name    string
		objs    []runtime.Object
		wantWhy string
	}{
		{
			name: "an unknown role",
			objs: []runtime.Object{
				fixture.MakePod().Namespace("cache").Name("s-0").BitnamiRedisCluster("sessions").
					Label(fixture.LabelRole, "master").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				fixture.MakePod().Namespace("cache").Name("s-1").BitnamiRedisCluster("sessions").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
			},
			// The policy still groups a pod with no role label as a
			// possible master; the repair will not guess.
			wantWhy: "is unknown",
		},
		{
			// The policy keeps a replica of unknown shard from every master,
			// since it may be that master's; the repair will not guess.
			name: "a shard not known",
			objs: []runtime.Object{
				fixture.MakePod().Namespace("cache").Name("s-0").BitnamiRedisCluster("sessions").
					Label(fixture.LabelRole, "master").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				fixture.MakePod().Namespace("cache").Name("s-1").BitnamiRedisCluster("sessions").
					Label(fixture.LabelRole, "replica").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
			},
			wantWhy: "the shard of cache/s-1 is unknown",
		},
		{
			name: "roles not confirmed by Redis",
			objs: []runtime.Object{
				fixture.MakePod().Namespace("cache").Name("s-0").BitnamiRedisCluster("sessions").
					Label(fixture.LabelRole, "master").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
				fixture.MakePod().Namespace("cache").Name("s-1").BitnamiRedisCluster("sessions").
					Label(fixture.LabelRole, "replica").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
			},
			wantWhy: "nothing can confirm them",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newHarness(t, append(tc.objs, fixture.MakeNode().Name("node-1").Obj(), fixture.MakeNode().Name("node-2").Obj())...)
			r := f.repairer(t, On)
			report := f.pass(t, r)
			if len(report.Violations) == 0 {
				t.Fatal("the audit found no violation")
			}
			if evicted, _ := f.evictions(); len(evicted) != 0 {
				t.Errorf("evicted %v", evicted)
			}
			if !f.recorder.has(ReasonPlanned, tc.wantWhy) {
				t.Errorf("no RepairPlanned event saying %q; events: %v", tc.wantWhy, f.recorder.events)
			}
		})
	}
	t.Run("the replica is the one planned, never the master", func(t *testing.T) {
		f := newHarness(t,
			fixture.MakePod().Namespace("cache").Name("s-0").BitnamiRedisCluster("sessions").
				Label(fixture.LabelRole, "master").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
			fixture.MakePod().Namespace("cache").Name("s-1").BitnamiRedisCluster("sessions").
				Label(fixture.LabelRole, "replica").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
			fixture.MakeNode().Name("node-1").Obj(),
		)
		report, err := f.auditor.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pol := f.repairer(t, Plan).cfg.Policies()
		steps := Steps(context.Background(), pol, f.cache, f.client, nil, DefaultMaxLagBytes, report)
		if len(steps) != 1 || steps[0].Action != Evict || steps[0].Target != "cache/s-1" || !strings.Contains(steps[0].Why, "not master cache/s-0") {
			t.Errorf("steps = %+v, want the eviction of replica cache/s-1", steps)
		}
	})
}

func waitCached(t *testing.T, f *harness, p *corev1.Pod) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := f.cache.PodByUID(p.UID); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the placement cache did not see the pod")
		}
	}
}

// tarpit is a Redis that never answers: Dial waits for its context.
type tarpit struct{}

func (tarpit) Dial(ctx context.Context, _, _ string, _ types.UID) (*redis.Client, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A Redis that never answers holds the pass (and the audit's loop behind
// it) no longer than PassTimeout, however many violations wait, and
// nothing acts on its silence.
func TestTarpitRedisBoundsThePass(t *testing.T) {
	var objs []runtime.Object
	for i := range 20 {
		name := fmt.Sprintf("node-%d", i)
		objs = append(objs, fixture.MakeNode().Name(name).Obj(),
			fixture.MakePod().Namespace("cache").Name(fmt.Sprintf("a-%d", i)).BitnamiRedisCluster("sessions").
				Label(fixture.LabelRole, "master").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node(name).Obj(),
			fixture.MakePod().Namespace("cache").Name(fmt.Sprintf("b-%d", i)).BitnamiRedisCluster("sessions").
				Label(fixture.LabelRole, "master").Label(fixture.LabelShard, "slot-5461").StatefulSet("sts", "sts-uid").Node(name).Obj())
	}
	f := newHarness(t, objs...)
	r := f.repairer(t, On)
	r.cfg.Redis, r.cfg.PassTimeout = tarpit{}, 200*time.Millisecond
	report, err := f.auditor.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Violations) < 20 {
		t.Fatalf("audit found %d violations, want 20 or more", len(report.Violations))
	}
	start := time.Now()
	r.Pass(context.Background(), report)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the pass took %s against a Redis that never answers, want about the 200ms PassTimeout", took)
	}
	if st := f.state(t); st.InFlight != nil {
		t.Errorf("a repair started on a silent Redis: %+v", st.InFlight)
	}
	if !f.recorder.has(ReasonPlanned, "does not answer") {
		t.Errorf("no RepairPlanned event saying Redis does not answer; events: %v", f.recorder.events)
	}
}

// One namespace's crowd of violations is told ten plans a pass, the rest
// by the passes after.
func TestPlansCappedPerNamespace(t *testing.T) {
	var objs []runtime.Object
	for i := range 20 {
		name := fmt.Sprintf("node-%d", i)
		objs = append(
			objs,
			fixture.MakeNode().Name(name).Obj(),
			fixture.MakePod().Namespace("logs").Name(fmt.Sprintf("es-data-%d-a", i)).Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node(name).Obj(),
			fixture.MakePod().Namespace("logs").Name(fmt.Sprintf("es-data-%d-b", i)).Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node(name).Obj(),
		)
	}
	f := newHarness(t, objs...)
	r := f.repairer(t, Plan)
	for pass, want := range []float64{eventsPerNamespace, 2 * eventsPerNamespace, 2 * eventsPerNamespace} {
		f.pass(t, r)
		if got := count(r, None, OutcomeRefused); got != want {
			t.Errorf("after pass %d: %v plans told, want %v", pass+1, got, want)
		}
	}
	if n := len(f.recorder.events); n != 2*2*eventsPerNamespace {
		t.Errorf("%d Events, want %d (two per plan, each plan once)", n, 2*2*eventsPerNamespace)
	}
}

// Plan mode makes a lasting violation's plan again only every replanEvery:
// its API reads and dry runs are not spent each pass.
func TestPlanModeReplansLastingViolationsRarely(t *testing.T) {
	f := newHarness(t,
		fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
		fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node("node-1").Obj(),
		pdb(map[string]string{"app.kubernetes.io/name": "elasticsearch"}),
		fixture.MakeNode().Name("node-1").Obj(),
	)
	r := f.repairer(t, Plan)
	for _, step := range []struct {
		after      time.Duration
		wantDryRun int
	}{
		{0, 1},
		{time.Minute, 1},
		{2 * time.Minute, 1},
		{replanEvery, 2},
	} {
		f.now = f.now.Add(step.after)
		f.pass(t, r)
		if _, dryRuns := f.evictions(); len(dryRuns) != step.wantDryRun {
			t.Errorf("%s later: %d dry-run evictions, want %d", step.after, len(dryRuns), step.wantDryRun)
		}
	}
	if got := count(r, Evict, OutcomePlanned); got != 1 {
		t.Errorf("planned = %v, want 1: a lasting plan is told once", got)
	}
}

// A change of role between two passes is a failover of every cluster the
// pod belongs to; the first pass, and a pass with the roles unchanged,
// see none.
func TestSeeFailovers(t *testing.T) {
	master := fixture.MakePod().Namespace("cache").Name("s-0").BitnamiRedisCluster("sessions").
		Label(fixture.LabelRole, "master").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-1").Obj()
	replica := fixture.MakePod().Namespace("cache").Name("s-1").BitnamiRedisCluster("sessions").
		Label(fixture.LabelRole, "replica").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-2").Obj()
	f := newHarness(t, master, replica, fixture.MakeNode().Name("node-1").Obj(), fixture.MakeNode().Name("node-2").Obj())
	r := f.repairer(t, On)
	pol := r.cfg.Policies()
	see := func() (bool, *state) {
		st := &state{}
		return r.seeFailovers(newPlanner(pol, f.cache, nil, f.client, 0), st, f.now), st
	}
	if changed, _ := see(); changed {
		t.Error("the first pass saw a failover")
	}
	if changed, _ := see(); changed {
		t.Error("a pass with the same roles saw a failover")
	}
	master.Labels["regosched.io/role"], replica.Labels["regosched.io/role"] = "replica", "master"
	for _, p := range []*corev1.Pod{master, replica} {
		if _, err := f.client.CoreV1().Pods(p.Namespace).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if p, ok := f.cache.PodByUID(replica.UID); ok {
			if role, _ := p.Labels.Get("regosched.io/role"); role == "master" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache did not see the new roles")
		}
	}
	changed, st := see()
	if want := map[string]time.Time{"bitnami-redis-cluster/cache/sessions": f.now}; !changed || !cmp.Equal(want, st.Failovers) {
		t.Errorf("after the roles swapped: changed %v, failovers %v; want true, %v", changed, st.Failovers, want)
	}
}
