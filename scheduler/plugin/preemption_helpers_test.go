package plugin

import (
	"context"
	"io"
	"io/fs"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/fixture"
)

// preemptionHarness is a scheduling framework of one profile with the
// resources' filter (NodeResourcesFit) and the Regosched plugin, whose
// PostFilter is default preemption; no stock DefaultPreemption, as in
// deploy/plugin. Preemption is synchronous: the victims are deleted when
// PostFilter returns.
type preemptionHarness struct {
	fw       framework.Framework
	client   *fake.Clientset
	snapshot *schedcache.Snapshot
}

func newPreemptionHarness(t *testing.T, bundle fs.FS, nodes []*corev1.Node, bound []*corev1.Pod, pending *corev1.Pod) *preemptionHarness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if bundle == nil {
		bundle = regosched.DefaultPolicy()
	}
	objs := []runtime.Object{pending}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	for _, p := range bound {
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	snapshot := schedcache.NewSnapshot(bound, nodes)
	log := logrus.New()
	log.SetOutput(io.Discard)
	fts := feature.Features{}
	metrics.Register() // the scheduling queue and preemption record to them
	newPlugin := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return New(ctx, Config{
			Bundles: bundles.Config{Default: bundle, Log: log}, Client: client, Snapshot: snapshot,
			SyncTimeout: 10 * time.Second, Log: log, Handle: h, Features: fts,
		})
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterPluginAsExtensions(noderesources.Name, frameworkruntime.FactoryAdapter(fts, noderesources.NewFit), "Filter", "PreFilter"),
		tf.RegisterPluginAsExtensions(Name, newPlugin, "PreFilter", "Filter", "PostFilter"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, fixture.SchedulerName,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, factory)),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithMutableSnapshotLister(snapshot),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
	)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return &preemptionHarness{fw: fw, client: client, snapshot: snapshot}
}

// preempted is one scheduling cycle's outcome after its filters: the node
// preemption nominates, its status, and the pods it deleted, sorted.
type preempted struct {
	nominated string
	code      fwk.Code
	message   string
	victims   []string
}

// preempt runs a cycle of pending as the scheduler does when no node fits:
// PreFilter, Filter on every node, then PostFilter.
func (h *preemptionHarness) preempt(t *testing.T, pending *corev1.Pod) preempted {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	if _, st, _ := h.fw.RunPreFilterPlugins(ctx, cs, pending); !st.IsSuccess() {
		t.Fatalf("PreFilter = %v", st)
	}
	infos, err := h.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]*fwk.Status{}
	for _, ni := range infos {
		st := h.fw.RunFilterPluginsWithNominatedPods(ctx, cs, pending, ni)
		if st.IsSuccess() {
			t.Fatalf("%s fits on %s: nothing to preempt", pending.Name, ni.Node().Name)
		}
		statuses[ni.Node().Name] = st
	}
	res, st := h.fw.RunPostFilterPlugins(ctx, cs, pending, framework.NewNodeToStatus(statuses, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)))
	got := preempted{code: st.Code(), message: st.Message()}
	if res != nil && res.NominatingInfo != nil {
		got.nominated = res.NominatedNodeName
	}
	for _, a := range h.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			got.victims = append(got.victims, d.GetName())
		}
	}
	slices.Sort(got.victims)
	return got
}

// undecidedPolicy is the default policy, but asking whether a pod labelled
// undecided=yes is protected fails (an answer that is no boolean).
func undecidedPolicy(t *testing.T) fstest.MapFS {
	t.Helper()
	mfs := policytest.DefaultFS(t)
	mfs["regosched/undecided.rego"] = &fstest.MapFile{Data: []byte(`package regosched.preemption

protected := "perhaps" if input.pod.labels.undecided == "yes"
`)}
	return mfs
}
