package plugin

import (
	"context"
	"io"
	"io/fs"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/explain"
	"github.com/regosched/regosched/internal/policy"
	ls "github.com/regosched/regosched/test/localstack"
)

const ns = "shop"

// redis is a Redis pod of cluster cache with priority prio, bound to node
// unless node is "".
func redis(name, role, shard string, prio int32, node string) *corev1.Pod {
	p := ls.RedisPod(ns, "cache", name, role, shard)
	p.UID = types.UID("uid-" + name)
	p.Spec.Priority = &prio
	p.Spec.NodeName = node
	return p
}

func node(name, zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone,
	}}}
}

// fixture is the plugin over three nodes in three zones, with
// cache-0's master (priority 100) on n1 and cache-1's (priority 1000) on n2.
type fixture struct {
	pl     *Regosched
	client *fake.Clientset
	nodes  map[string]fwk.NodeInfo
}

// options vary the fixture: pods (by name) left out of the scheduler's
// snapshot, as when its informer is ahead of the cache's or behind it, and
// pods the API server no longer has, though the cache still lists them.
type options struct {
	notInSnapshot []string
	deleted       []string
	policy        fs.FS // the embedded default when nil
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, options{}) }

func newFixtureWith(t *testing.T, o options) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nodes := []*corev1.Node{node("n1", "zone-a"), node("n2", "zone-b"), node("n3", "zone-c")}
	pods := []*corev1.Pod{
		redis("cache-0-master", "master", "0", 100, "n1"),
		redis("cache-1-master", "master", "1", 1000, "n2"),
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
	f := &fixture{client: client, nodes: map[string]fwk.NodeInfo{}}
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
	pol, _, err := explain.LoadPolicy(ctx, "", "", bundle)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	if f.pl, err = New(ctx, client, snapshot, pol, log, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return f
}

// filter runs Filter on every node and gives each node's status code.
func (f *fixture) filter(t *testing.T, cs fwk.CycleState, pod *corev1.Pod) map[string]string {
	t.Helper()
	got := map[string]string{}
	for name, ni := range f.nodes {
		got[name] = f.pl.Filter(context.Background(), cs, pod, ni).Code().String()
	}
	return got
}

func (f *fixture) preFilter(t *testing.T, pod *corev1.Pod) (fwk.CycleState, *fwk.Status) {
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

const (
	ok           = "Success"
	unsched      = "Unschedulable"
	unresolvable = "UnschedulableAndUnresolvable"
)

func TestFilter(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name    string
		pod     *corev1.Pod
		wantPre string
		want    map[string]string
	}{
		{
			name:    "a master avoids both masters; only the lower-priority one may be preempted",
			pod:     redis("cache-2-master", "master", "2", 500, ""),
			wantPre: ok,
			want:    map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok},
		},
		{
			name:    "a master of priority 100 preempts no peer of equal priority",
			pod:     redis("cache-2-master", "master", "2", 100, ""),
			wantPre: ok,
			want:    map[string]string{"n1": unresolvable, "n2": unresolvable, "n3": ok},
		},
		{
			name:    "a replica avoids its own shard's master only",
			pod:     redis("cache-1-replica", "replica", "1", 2000, ""),
			wantPre: ok,
			want:    map[string]string{"n1": ok, "n2": unsched, "n3": ok},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, st := f.preFilter(t, tt.pod)
			if got := st.Code().String(); got != tt.wantPre {
				t.Fatalf("PreFilter = %v, want %s", st, tt.wantPre)
			}
			if diff := cmp.Diff(tt.want, f.filter(t, cs, tt.pod)); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

// The cache and the scheduler's snapshot disagree about a conflicting peer:
// the API server settles it.
func TestFilterWhenTheViewsDisagree(t *testing.T) {
	pod := redis("cache-2-master", "master", "2", 500, "")
	tests := []struct {
		name string
		opts options
		want map[string]string
	}{
		{
			name: "a peer deleted: the snapshot and the API server no longer have it",
			opts: options{notInSnapshot: []string{"cache-0-master"}, deleted: []string{"cache-0-master"}},
			want: map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
		{
			name: "a peer bound: the snapshot does not have it yet, the API server does",
			opts: options{notInSnapshot: []string{"cache-1-master"}},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixtureWith(t, tt.opts)
			cs, st := f.preFilter(t, pod)
			if !st.IsSuccess() {
				t.Fatalf("PreFilter = %v", st)
			}
			if diff := cmp.Diff(tt.want, f.filter(t, cs, pod)); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

// slowPolicy groups every pod, and describes one labelled slow=yes for
// hours (ten billion products) unless cancelled; any other at once, so that
// it compiles (the compiler's smoke test describes a sample pod).
var slowPolicy = fstest.MapFS{"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains "all"

claims := {"marks": {"m": "slow"}, "separate": [], "spread": []} if {
	input.pod.labels.slow == "yes"
	count([1 | some i in numbers.range(1, 100000); some j in numbers.range(1, 100000); i * j < 0]) == 0
}
`)}}

// A runaway policy must not hold the scheduler's one cycle: PreFilter gives
// up after policy.DescribeTimeout with an error (the pod is retried).
func TestPreFilterStopsARunawayPolicy(t *testing.T) {
	f := newFixtureWith(t, options{policy: slowPolicy})
	pod := ls.PlainPod(ns, "slow")
	pod.Labels = map[string]string{"slow": "yes"}
	done := make(chan *fwk.Status, 1)
	go func() {
		_, st := f.preFilter(t, pod)
		done <- st
	}()
	select {
	case st := <-done:
		if st.Code() != fwk.Error {
			t.Errorf("PreFilter = %v, want Error", st)
		}
	case <-time.After(3*policy.DescribeTimeout + 5*time.Second):
		t.Fatal("PreFilter still evaluating the policy")
	}
}

func TestPreFilterSkipsAPodInNoGroup(t *testing.T) {
	f := newFixture(t)
	_, st := f.preFilter(t, ls.PlainPod(ns, "web"))
	if st.Code() != fwk.Skip {
		t.Errorf("PreFilter = %v, want Skip", st)
	}
}

func TestFilterWithoutPreFilterIsAnError(t *testing.T) {
	f := newFixture(t)
	st := f.pl.Filter(context.Background(), framework.NewCycleState(), redis("x", "master", "2", 1, ""), f.nodes["n1"])
	if st.Code() != fwk.Error {
		t.Errorf("Filter = %v, want Error", st)
	}
}

// The preemption dry run: RemovePod and AddPod on a clone of the state
// change what Filter says there and nowhere else.
func TestPreemptionDryRun(t *testing.T) {
	f := newFixture(t)
	pod := redis("cache-2-master", "master", "2", 500, "")
	cs, _ := f.preFilter(t, pod)
	ctx := context.Background()
	victim := redis("cache-0-master", "master", "0", 100, "n1")
	nominated := redis("cache-3-master", "master", "3", 800, "")
	unrelated := ls.PlainPod(ns, "web")
	unrelated.Spec.NodeName = "n1"

	steps := []struct {
		name string
		do   func(clone fwk.CycleState) *fwk.Status
		want map[string]string
	}{
		{
			name: "the lower-priority peer removed",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.RemovePod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
			},
			want: map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
		{
			name: "and an unrelated pod added back",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, unrelated), f.nodes["n1"])
			},
			want: map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
		{
			name: "and the peer reprieved",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok},
		},
		{
			name: "a nominated master put on n3",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, nominated), f.nodes["n3"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": unresolvable},
		},
		{
			name: "and taken off again",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.RemovePod(ctx, clone, pod, podInfo(t, nominated), f.nodes["n3"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok},
		},
	}
	clone := cs.Clone()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if st := s.do(clone); !st.IsSuccess() {
				t.Fatalf("extension = %v", st)
			}
			if diff := cmp.Diff(s.want, f.filter(t, clone, pod)); diff != "" {
				t.Errorf("Filter on the clone (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the original state is untouched", func(t *testing.T) {
		clone := cs.Clone()
		_ = f.pl.RemovePod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
		want := map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok}
		if diff := cmp.Diff(want, f.filter(t, cs, pod)); diff != "" {
			t.Errorf("Filter on the original (-want +got):\n%s", diff)
		}
	})
}

func TestScore(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[string]int64 // normalized; nil: Score skipped
	}{
		{
			// node_spread 1 on each node of a cluster member (n1, n2),
			// zone_apart 2 on the zone of its shard's master (n1's).
			name: "a replica of shard 0 prefers the node and zone with no member",
			pod:  redis("cache-0-replica", "replica", "0", 0, ""),
			want: map[string]int64{"n1": 0, "n2": 67, "n3": 100},
		},
		{
			name: "a pod in no group has no preference",
			pod:  ls.PlainPod(ns, "web"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := f.preFilter(t, tt.pod)
			st := f.pl.PreScore(ctx, cs, tt.pod, nil)
			if tt.want == nil {
				if st.Code() != fwk.Skip {
					t.Errorf("PreScore = %v, want Skip", st)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("PreScore = %v", st)
			}
			var scores fwk.NodeScoreList
			for _, name := range []string{"n1", "n2", "n3"} {
				s, st := f.pl.Score(ctx, cs, tt.pod, f.nodes[name])
				if !st.IsSuccess() {
					t.Fatalf("Score(%s) = %v", name, st)
				}
				scores = append(scores, fwk.NodeScore{Name: name, Score: s})
			}
			if st := f.pl.NormalizeScore(ctx, cs, tt.pod, scores); !st.IsSuccess() {
				t.Fatalf("NormalizeScore = %v", st)
			}
			got := map[string]int64{}
			for _, s := range scores {
				got[s.Name] = s.Score
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

// Reserve makes the pod a peer of the next one at once; Unreserve takes
// that back.
func TestReserveAndUnreserve(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := redis("cache-2-master", "master", "2", 500, "")
	next := redis("cache-3-master", "master", "3", 500, "")

	// Reserved, the pod is not bound yet, and not in the snapshot of this
	// test; the API server has it, pending.
	if _, err := f.client.CoreV1().Pods(ns).Create(ctx, first, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs, _ := f.preFilter(t, first)
	if st := f.pl.Reserve(ctx, cs, first, "n3"); !st.IsSuccess() {
		t.Fatalf("Reserve = %v", st)
	}
	nextCS, _ := f.preFilter(t, next)
	want := map[string]string{"n1": unsched, "n2": unresolvable, "n3": unresolvable}
	if diff := cmp.Diff(want, f.filter(t, nextCS, next)); diff != "" {
		t.Errorf("after Reserve, Filter (-want +got):\n%s", diff)
	}

	f.pl.Unreserve(ctx, cs, first, "n3")
	nextCS, _ = f.preFilter(t, next)
	want = map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok}
	if diff := cmp.Diff(want, f.filter(t, nextCS, next)); diff != "" {
		t.Errorf("after Unreserve, Filter (-want +got):\n%s", diff)
	}
}

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    Args
		wantErr bool
	}{
		{name: "none", want: Args{LogLevel: "info", SyncTimeout: "2m"}},
		{name: "all", raw: `{"policy":"/etc/regosched/bundle.tar.gz","policyData":"/etc/regosched/data.yaml","logLevel":"debug","syncTimeout":"30s"}`,
			want: Args{Policy: "/etc/regosched/bundle.tar.gz", PolicyData: "/etc/regosched/data.yaml", LogLevel: "debug", SyncTimeout: "30s"}},
		{name: "an unknown field", raw: `{"polcy":"x"}`, wantErr: true},
		{name: "not JSON", raw: `{`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj runtime.Object
			if tt.raw != "" {
				obj = &runtime.Unknown{Raw: []byte(tt.raw), ContentType: runtime.ContentTypeJSON}
			}
			got, err := decodeArgs(obj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeArgs error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); !tt.wantErr && diff != "" {
				t.Errorf("decodeArgs (-want +got):\n%s", diff)
			}
		})
	}
}
