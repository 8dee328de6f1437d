package decision

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/fixture"
)

// switchable is the active policy, replaced as a reload does.
type switchable struct{ p atomic.Pointer[policy.Policy] }

func (s *switchable) Load() *policy.Policy { return s.p.Load() }

// TestBindAfterAReloadJudgesUnderTheNewPolicy: a pod passes filter under a
// policy that does not group it, then a reload groups it with a master
// already bound on the node. Bind must not trust the reservation the old
// policy made (its groups are not the index's any more): judged under the
// new policy, the bind is refused.
func TestBindAfterAReloadJudgesUnderTheNewPolicy(t *testing.T) {
	ctx := context.Background()
	// Under old, no Redis workload matches: no rule, no group.
	old := policytest.Variant(t, func(s string) string {
		return strings.Replace(s, `"app.kubernetes.io/name": "redis"`, `"app.kubernetes.io/name": "not-redis"`, 1)
	})
	current := defaultPolicy(t)
	active := &switchable{}
	active.p.Store(old)

	bound := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model()
	pending := fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Model()
	objs := []runtime.Object{podObject(bound), fixture.MakeNode().Name("node-1").Obj(), fixture.MakeNode().Name("node-2").Obj()}
	client := fake.NewClientset(objs...)
	createPending(t, client, pending)
	log, _ := logtest.NewNullLogger()
	cache, err := placement.New(client, policy.Describer(active.Load), log)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); cache.Shutdown() })
	cache.Start(cctx)
	if !cache.WaitForSync(cctx) {
		t.Fatal("cache did not sync")
	}
	d, err := New(cache, active, log, prometheus.NewRegistry(), Options{Client: client, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}

	res, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(pending), NodeNames: names("node-1", "node-2")})
	if err != nil {
		t.Fatal(err)
	}
	if got := *res.NodeNames; len(got) != 2 {
		t.Fatalf("filter under the old policy kept %v, want both nodes", got)
	}

	// The reload: index and policy swap together.
	if err := cache.SetKeyFunc(ctx, policy.Describer(func() *policy.Policy { return current }), func() { active.p.Store(current) }); err != nil {
		t.Fatal(err)
	}
	err = d.Bind(ctx, bindArgs(pending, "node-1"))
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Bind() after the reload = %v, want ErrRefused (two masters of cache on node-1)", err)
	}
	if got := nodeOf(t, client, pending); got != "" {
		t.Errorf("pod bound to %q, want unbound", got)
	}
}

// flipping is a policy replaced at every look: a reload storm.
type flipping struct {
	ps [2]*policy.Policy
	n  atomic.Int32
}

func (f *flipping) Load() *policy.Policy { return f.ps[f.n.Add(1)%2] }

// TestBindGivesUpUnderAReloadStorm: a bind whose policy keeps changing under
// it is judged again a bounded number of times, then fails, counted as a
// bind error, and records nothing.
func TestBindGivesUpUnderAReloadStorm(t *testing.T) {
	reg := prometheus.NewRegistry()
	d, client := newDecider(t, nil, reg)
	d.policies = &flipping{ps: [2]*policy.Policy{defaultPolicy(t), defaultPolicy(t)}}
	p := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model()
	createPending(t, client, p)
	if err := d.Bind(context.Background(), bindArgs(p, "node-1")); !errors.Is(err, errPolicyChanged) {
		t.Fatalf("Bind() = %v, want errPolicyChanged", err)
	}
	if got := testutil.ToFloat64(d.binds.WithLabelValues("error")); got != 1 {
		t.Errorf("regosched_binds_total{outcome=\"error\"} = %v, want 1", got)
	}
	if got := nodeOf(t, client, p); got != "" {
		t.Errorf("pod bound to %q, want unbound", got)
	}
}
