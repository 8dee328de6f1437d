package repair

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/test/fixture"
)

func v(ns, a, b string) audit.Violation {
	return audit.Violation{Rule: "r", Namespace: ns, Pods: []string{ns + "/" + a, ns + "/" + b}}
}

func names(vs []audit.Violation) []string {
	out := make([]string, 0, len(vs))
	for _, x := range vs {
		out = append(out, x.Pods[0]+"+"+strings.TrimPrefix(x.Pods[1], x.Namespace+"/"))
	}
	return out
}

// The order of a pass: round robin over namespaces from after the
// cursor, round robin over a namespace's clusters, oldest first.
func TestTurnsOrder(t *testing.T) {
	now := time.Date(2026, 12, 8, 12, 0, 0, 0, time.UTC)
	// The cluster is the first letter of the first pod's name.
	clusterOf := func(x audit.Violation) string { return x.Pods[0][:strings.Index(x.Pods[0], "/")+2] }
	tests := []struct {
		name      string
		cursor    string
		firstSeen map[string]time.Time
		in        []audit.Violation
		want      []string
	}{
		{
			name: "one namespace's crowd does not push another's out",
			in:   []audit.Violation{v("a", "x0", "x1"), v("a", "x0", "x2"), v("a", "x1", "x2"), v("b", "y0", "y1")},
			want: []string{"a/x0+x1", "b/y0+y1", "a/x0+x2", "a/x1+x2"},
		},
		{
			name:   "the pass begins after the namespace served last",
			cursor: "a",
			in:     []audit.Violation{v("a", "x0", "x1"), v("b", "y0", "y1"), v("c", "z0", "z1")},
			want:   []string{"b/y0+y1", "c/z0+z1", "a/x0+x1"},
		},
		{
			name:   "a cursor of a namespace gone",
			cursor: "bb",
			in:     []audit.Violation{v("a", "x0", "x1"), v("b", "y0", "y1"), v("c", "z0", "z1")},
			want:   []string{"c/z0+z1", "a/x0+x1", "b/y0+y1"},
		},
		{
			name: "round robin over a namespace's clusters",
			in:   []audit.Violation{v("a", "e0", "e1"), v("a", "e0", "e2"), v("a", "r0", "r1")},
			want: []string{"a/e0+e1", "a/r0+r1", "a/e0+e2"},
		},
		{
			name: "the oldest first, and the cluster of the oldest first",
			firstSeen: map[string]time.Time{
				"r|a/r0,a/r1": now.Add(-time.Hour),
				"r|a/e0,a/e2": now.Add(-time.Minute),
			},
			in:   []audit.Violation{v("a", "e0", "e1"), v("a", "e0", "e2"), v("a", "r0", "r1")},
			want: []string{"a/r0+r1", "a/e0+e2", "a/e0+e1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := turns{cursor: tc.cursor, firstSeen: tc.firstSeen}
			got := names(tr.order(tc.in, clusterOf, now))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if len(tr.firstSeen) != len(tc.in) {
				t.Errorf("first seen keeps %d violations, want the %d of the pass", len(tr.firstSeen), len(tc.in))
			}
		})
	}
}

// The hourly budget shared by namespace: what a namespace started beyond
// its share does not hold another's first repair.
func TestBudgetShares(t *testing.T) {
	now := time.Date(2026, 12, 8, 12, 0, 0, 0, time.UTC)
	done := func(ns string, n int, ago time.Duration) []record {
		var out []record
		for i := range n {
			out = append(out, record{Target: fmt.Sprintf("%s/p-%d", ns, i), Started: now.Add(-ago)})
		}
		return out
	}
	vs := []audit.Violation{v("tenant", "a", "b"), v("victim", "a", "b")}
	tests := []struct {
		name string
		st   state
		max  int
		ns   string
		want string
	}{
		{"the tenant spent the hour alone: the victim still starts", state{Done: done("tenant", 6, 10*time.Minute)}, 6, "victim", ""},
		{"the tenant is past its share", state{Done: done("tenant", 6, 10*time.Minute)}, 6, "tenant", "its share of --repair-max-per-hour (6 among 2 namespaces)"},
		{"within its share", state{Done: done("tenant", 2, 10*time.Minute)}, 6, "tenant", ""},
		{"an hour ago does not count", state{Done: done("tenant", 6, 61*time.Minute)}, 6, "tenant", ""},
		{"the one in flight counts against its namespace",
			state{Done: done("tenant", 2, time.Minute), InFlight: &inFlight{Target: "tenant/x", Started: now}}, 6, "tenant", "3 repairs of namespace tenant"},
		{"everyone within shares, the whole budget spent", state{Done: append(done("tenant", 3, time.Minute), done("victim", 3, time.Minute)...)}, 6, "victim", "6 repairs were started in the last hour"},
		{"at least one each", state{}, 1, "victim", ""},
		{"a budget of none", state{}, 0, "victim", "--repair-max-per-hour is 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := newBudget(&tc.st, vs, tc.max, now).hold(tc.ns)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("hold(%s) = %q, want %q", tc.ns, got, tc.want)
			}
		})
	}
}

// A namespace whose planning is slow spends its own share of the pass.
func TestPassClockShares(t *testing.T) {
	at := time.Unix(0, 0)
	c := newPassClock([]audit.Violation{v("slow", "a", "b"), v("quick", "a", "b")}, 10*time.Second, func() time.Time { return at })
	slow := func(ctx context.Context) Step {
		deadline, _ := ctx.Deadline()
		at = at.Add(time.Until(deadline).Round(time.Second)) // spends all it is given
		return Step{}
	}
	if _, ok := c.plan(context.Background(), "slow", slow); !ok {
		t.Fatal("the first plan of slow was not made")
	}
	if _, ok := c.plan(context.Background(), "slow", slow); ok {
		t.Error("slow planned past its share")
	}
	if _, ok := c.plan(context.Background(), "quick", func(context.Context) Step { return Step{} }); !ok {
		t.Error("quick got no time after slow spent its share")
	}
	if c.share != 5*time.Second {
		t.Errorf("share = %s, want 5s (10s among 2 namespaces)", c.share)
	}
}

func budgetFor(ns string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "elasticsearch"}}},
	}
}

// esPair is two Elasticsearch data pods of ns's cluster es on node.
func esPair(ns, node string, i int) []runtime.Object {
	pod := func(j int) runtime.Object {
		return fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("es-%d-%d", i, j)).Elasticsearch("es", "data").StatefulSet("sts", "sts-uid").Node(node).Obj()
	}
	return []runtime.Object{pod(0), pod(1)}
}

// The reviewer's starvation by order: 15 pods of a tenant on one node are
// 105 violations that sort before another namespace's; MaxSteps 100 never
// reached it. Now it is planned, and repaired, in the first pass.
func TestCrowdDoesNotStarveAnotherNamespace(t *testing.T) {
	objs := []runtime.Object{fixture.MakeNode().Name("node-1").Obj(), fixture.MakeNode().Name("node-2").Obj(), budgetFor("b-victim")}
	for i := range 15 {
		objs = append(objs, fixture.MakePod().Namespace("a-tenant").Name(fmt.Sprintf("es-%d", i)).Elasticsearch("es", "data").Node("node-1").Obj())
	}
	objs = append(objs, esPair("b-victim", "node-2", 0)...)
	f := newHarness(t, objs...)
	r := f.repairer(t, On)
	report := f.pass(t, r)
	if len(report.Violations) != 106 {
		t.Fatalf("audit found %d violations, want 105 of the tenant and 1 of the victim", len(report.Violations))
	}
	evicted, _ := f.evictions()
	if diff := cmp.Diff([]string{"b-victim/es-0-1"}, evicted); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
}

// The reviewer's shared budget: six evictable pairs of a tenant spent the
// hour (--repair-max-per-hour 6) before another namespace's turn. Now the
// victim's repair is the second started.
func TestTenantDoesNotSpendTheHour(t *testing.T) {
	objs := []runtime.Object{budgetFor("a-tenant"), budgetFor("b-victim")}
	for i := range 7 {
		objs = append(objs, fixture.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj())
	}
	for i := range 6 {
		objs = append(objs, esPair("a-tenant", fmt.Sprintf("node-%d", i), i)...)
	}
	objs = append(objs, esPair("b-victim", "node-6", 0)...)
	f := newHarness(t, objs...)
	r := f.repairer(t, On)
	// Each pass follows up the eviction before it and starts the next.
	for range 8 {
		f.pass(t, r)
		f.now = f.now.Add(time.Minute)
		evicted, _ := f.evictions()
		for _, e := range evicted {
			_, name, _ := strings.Cut(e, "/")
			f.waitGone(t, types.UID("uid-"+name))
		}
	}
	evicted, _ := f.evictions()
	var tenant int
	victimAt := -1
	for i, e := range evicted {
		if strings.HasPrefix(e, "b-victim/") {
			victimAt = i
		} else {
			tenant++
		}
	}
	if victimAt < 0 || victimAt > 1 {
		t.Errorf("the victim's eviction is at %d of %v, want among the first two", victimAt, evicted)
	}
	if tenant > 3 {
		t.Errorf("the tenant started %d repairs, want at most its share of 3 while the victim waited", tenant)
	}
}

// A repair that never takes effect holds the one slot no longer than its
// timeout, counts against its own namespace, and the next turn goes to
// the other namespace.
func TestLingeringRepairYieldsTheSlot(t *testing.T) {
	objs := []runtime.Object{budgetFor("a-tenant"), budgetFor("b-victim"),
		fixture.MakeNode().Name("node-1").Obj(), fixture.MakeNode().Name("node-2").Obj(), fixture.MakeNode().Name("node-3").Obj()}
	objs = append(objs, esPair("a-tenant", "node-1", 0)...)
	objs = append(objs, esPair("a-tenant", "node-3", 1)...)
	objs = append(objs, esPair("b-victim", "node-2", 0)...)
	f := newHarness(t, objs...)
	f.linger = true
	r := f.repairer(t, On)
	f.pass(t, r)
	if evicted, _ := f.evictions(); len(evicted) != 1 || !strings.HasPrefix(evicted[0], "a-tenant/") {
		t.Fatalf("evicted %v, want the tenant's first", evicted)
	}
	f.now = f.now.Add(30 * time.Second)
	f.pass(t, r)
	if evicted, _ := f.evictions(); len(evicted) != 1 {
		t.Fatalf("evicted %v within the timeout, want the slot held", evicted)
	}
	f.now = f.now.Add(time.Minute) // past --repair-timeout (1m)
	f.pass(t, r)                   // fails the lingering repair
	f.pass(t, r)
	evicted, _ := f.evictions()
	if len(evicted) != 2 || !strings.HasPrefix(evicted[1], "b-victim/") {
		t.Errorf("evicted %v, want the victim's next", evicted)
	}
	if got := count(r, Evict, OutcomeFailed); got != 1 {
		t.Errorf("failed = %v, want 1", got)
	}
}
