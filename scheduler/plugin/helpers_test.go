package plugin

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/test/fixture"
)

const ns = "shop"

// harness is the plugin over three nodes in three zones, with
// cache-0's master (priority 100) on n1 and cache-1's (priority 1000) on n2.
type harness struct {
	pl     *Regosched
	reg    *prometheus.Registry
	client *fake.Clientset
	nodes  map[string]fwk.NodeInfo
	syncs  int // pods sync created
}

// options vary the harness: pods (by name) left out of the scheduler's
// snapshot, as when its informer is ahead of the cache's or behind it, and
// pods the API server no longer has, though the cache still lists them.
type options struct {
	notInSnapshot []string
	deleted       []string
	policy        fs.FS // the embedded default when nil
	// unprotected lifts the default policy's protection of Redis masters
	// from preemption, for tests of preemption among masters.
	unprotected bool
	// shadowPolicy is Config.ShadowPolicy.
	shadowPolicy string
	// decisionLog is Config.DecisionLog.
	decisionLog decisionlog.Config
	// moreNodes join n1..n3, for tests of several nodes in one zone.
	moreNodes []*corev1.Node
	// clock is Config.Clock.
	clock clock.WithTicker
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, options{}) }

func newHarnessWith(t *testing.T, o options) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nodes := []*corev1.Node{
		fixture.MakeNode().Name("n1").Hostname().Zone("zone-a").Obj(),
		fixture.MakeNode().Name("n2").Hostname().Zone("zone-b").Obj(),
		fixture.MakeNode().Name("n3").Hostname().Zone("zone-c").Obj(),
	}
	nodes = append(nodes, o.moreNodes...)
	pods := []*corev1.Pod{
		fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1").Obj(),
		fixture.MakePod().Namespace(ns).Name("cache-1-master").Redis("cache", "master", "1").Priority(1000).Node("n2").Obj(),
	}
	var objs []runtime.Object
	var snapPods []*corev1.Pod
	for _, p := range pods {
		objs = append(objs, p)
		if !slices.Contains(o.notInSnapshot, p.Name) {
			snapPods = append(snapPods, p)
		}
	}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	// The informers list and watch; only the API reads see the deletions.
	client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.GetAction).GetName()
		if slices.Contains(o.deleted, name) {
			return true, nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
		}
		return false, nil, nil
	})
	snapshot := schedcache.NewSnapshot(snapPods, nodes)
	f := &harness{client: client, nodes: map[string]fwk.NodeInfo{}, reg: prometheus.NewRegistry()}
	for _, n := range nodes {
		ni, err := snapshot.NodeInfos().Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		f.nodes[n.Name] = ni
	}
	bundle := o.policy
	if bundle == nil {
		bundle = regosched.DefaultPolicy()
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	var err error
	var data string
	if o.unprotected {
		data = filepath.Join(t.TempDir(), "data.json")
		if err := os.WriteFile(data, []byte(`{"workloads":{"redis":{"protected_roles":[]}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if f.pl, err = New(ctx, Config{
		Bundles: bundles.Config{Default: bundle, DataFile: data, Log: log}, Client: client, Snapshot: snapshot,
		Registerer: f.reg, SyncTimeout: 10 * time.Second, ShadowPolicy: o.shadowPolicy,
		DecisionLog: o.decisionLog, Log: log, Clock: o.clock,
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// filter runs Filter on every node and gives each node's status code.
func (f *harness) filter(t *testing.T, cs fwk.CycleState, pod *corev1.Pod) map[string]string {
	t.Helper()
	got := map[string]string{}
	for name, ni := range f.nodes {
		got[name] = f.pl.Filter(context.Background(), cs, pod, ni).Code().String()
	}
	return got
}

func (f *harness) preFilter(t *testing.T, pod *corev1.Pod) (fwk.CycleState, *fwk.Status) {
	t.Helper()
	cs := framework.NewCycleState()
	_, st := f.pl.PreFilter(context.Background(), cs, pod, nil)
	return cs, st
}

func podInfo(t *testing.T, p *corev1.Pod) fwk.PodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(p)
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

// sync returns once the placement cache has handled every pod event sent
// before it: it creates a bound pod of a cluster of its own, which no test
// pod is a peer of, and waits until the cache indexes it (the informer
// handles events in order).
func (f *harness) sync(t *testing.T) {
	t.Helper()
	f.syncs++
	name := fmt.Sprintf("sync-%d", f.syncs)
	p := fixture.MakePod().Namespace(ns).Name(name+"-0").UID("uid-"+name).Redis(name, "master", "0").Node("n1").Obj()
	if _, err := f.client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := f.pl.cache.PodByUID(p.UID); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the placement cache did not index %s within 30s", name)
		}
	}
}

const (
	ok           = "Success"
	unsched      = "Unschedulable"
	unresolvable = "UnschedulableAndUnresolvable"
)
