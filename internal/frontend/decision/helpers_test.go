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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
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

func redis(name, role, shard, node string, prio int32) *model.Pod {
	labels := map[string]string{
		"app.kubernetes.io/name":      "redis",
		"app.kubernetes.io/instance":  "cache",
		"app.kubernetes.io/component": role,
	}
	if shard != "" {
		labels["regosched.io/shard"] = shard
	}
	return &model.Pod{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Labels: model.NewLabels(labels), Priority: prio, Node: node}
}

func esData(name, node string) *model.Pod {
	return &model.Pod{Namespace: "logs", Name: name, UID: types.UID("uid-" + name), Node: node, Labels: model.NewLabels(map[string]string{
		"app.kubernetes.io/name":      "elasticsearch",
		"app.kubernetes.io/instance":  "es",
		"app.kubernetes.io/component": "data",
	})}
}

// pendingPod is the Kubernetes object the scheduler sends for p.
func pendingPod(p *model.Pod) *v1.Pod {
	prio := p.Priority
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels.Map()},
		Spec:       v1.PodSpec{Priority: &prio},
	}
}

// podObject is the bound Kubernetes pod behind p.
func podObject(p *model.Pod) *v1.Pod {
	prio := p.Priority
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels.Map()},
		Spec:       v1.PodSpec{Priority: &prio, NodeName: p.Node, SchedulerName: testScheduler},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
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
		objs = append(objs, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
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
		peers = append(peers, redis(fmt.Sprintf("cache-%d", i), role, fmt.Sprint(i/2), fmt.Sprintf("node-%d", i%4+1), 0))
	}
	return peers, redis("cache-new", "master", "9", "", 0)
}

// benchCandidates are node-1..n.
func benchCandidates(n int) []string {
	candidates := make([]string, n)
	for i := range candidates {
		candidates[i] = fmt.Sprintf("node-%d", i+1)
	}
	return candidates
}
