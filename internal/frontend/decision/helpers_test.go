package decision

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/fixture"
)

type staticPolicies struct{ p *policy.Policy }

func (s staticPolicies) Load() *policy.Policy { return s.p }

// defaultPolicy is the policy regosched ships.
func defaultPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	return policytest.Default(t)
}

// loadFS reads and compiles the bundle in fsys, as regosched loads it.
func loadFS(t testing.TB, fsys fs.FS, name string) *policy.Policy {
	t.Helper()
	p, err := bundles.Options{}.LoadFS(context.Background(), fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// redis and esData are kept for decisionlog_test.go and
// decisionlog_bench_test.go, which are being edited elsewhere; the other
// tests build their pods with fixture, as these two should once free.
// object is the Kubernetes pod of p, as far as p tells.
func object(p *model.Pod) *fixture.PodWrapper {
	return fixture.MakePod().Namespace(p.Namespace).Name(p.Name).UID(string(p.UID)).Labels(p.Labels.Map()).Priority(p.Priority)
}

// pendingPod is the Kubernetes object the scheduler sends for p.
func pendingPod(p *model.Pod) *v1.Pod { return object(p).Obj() }

// podObject is the bound Kubernetes pod behind p.
func podObject(p *model.Pod) *v1.Pod {
	return object(p).Node(p.Node).SchedulerName(testScheduler).Phase(v1.PodRunning).Obj()
}

var zones = map[string]map[string]string{
	"node-1": {"topology.kubernetes.io/zone": "zone-a"},
	"node-2": {"topology.kubernetes.io/zone": "zone-b"},
	"node-3": {"topology.kubernetes.io/zone": "zone-c"},
	"node-4": {"topology.kubernetes.io/zone": "zone-a"},
}

// testScheduler is the profile the tests' deciders serve, and their pods'
// schedulerName.
const testScheduler = "regosched"

// newDecider runs the real placement cache over a fake clientset that holds
// the nodes of zones and the given bound pods.
func newDecider(t testing.TB, bound []*model.Pod, reg prometheus.Registerer) (*Decider, *fake.Clientset) {
	t.Helper()
	return newDeciderWith(t, bound, reg, Options{})
}

// newDeciderWith is newDecider with opts, whose Client and MaxWait it sets,
// and SchedulerName when empty.
func newDeciderWith(t testing.TB, bound []*model.Pod, reg prometheus.Registerer, opts Options) (*Decider, *fake.Clientset) {
	t.Helper()
	return newDeciderWithPolicy(t, defaultPolicy(t), bound, reg, opts)
}

// newDeciderWithPolicy is newDeciderWith deciding with pol.
func newDeciderWithPolicy(t testing.TB, pol *policy.Policy, bound []*model.Pod, reg prometheus.Registerer, opts Options) (*Decider, *fake.Clientset) {
	t.Helper()
	var objs []runtime.Object
	for name, labels := range zones {
		objs = append(objs, fixture.MakeNode().Name(name).Labels(labels).Obj())
	}
	for _, p := range bound {
		objs = append(objs, podObject(p))
	}
	client := fake.NewClientset(objs...)
	log, _ := logtest.NewNullLogger()
	cache, err := placement.New(client, policy.Describer(func() *policy.Policy { return pol }), log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); cache.Shutdown() })
	cache.Start(ctx)
	if !cache.WaitForSync(ctx) {
		t.Fatal("cache did not sync")
	}
	opts.Client, opts.MaxWait = client, 100*time.Millisecond
	if opts.SchedulerName == "" {
		opts.SchedulerName = testScheduler
	}
	d, err := New(cache, staticPolicies{pol}, log, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d, client
}

// names is a candidate list, as a request decodes it.
func names(n ...string) *[]string {
	c := slices.Clone(n)
	return &c
}

// benchCluster is the benchmarks' cluster: six shards of a Redis cluster,
// master and replica, on node-1..4, and a pending master of a seventh.
func benchCluster() (peers []*model.Pod, pending *model.Pod) {
	for i := range 12 {
		role := "replica"
		if i%2 == 0 {
			role = "master"
		}
		peers = append(peers,
			fixture.MakePod().Namespace("shop").Name(fmt.Sprintf("cache-%d", i)).Redis("cache", role, fmt.Sprint(i/2)).Node(fmt.Sprintf("node-%d", i%4+1)).Model(),
		)
	}
	return peers, fixture.MakePod().Namespace("shop").Name("cache-new").Redis("cache", "master", "9").Model()
}

// benchCandidates are node-1..n.
func benchCandidates(n int) []string {
	candidates := make([]string, n)
	for i := range candidates {
		candidates[i] = fmt.Sprintf("node-%d", i+1)
	}
	return candidates
}
