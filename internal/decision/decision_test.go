package decision

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
)

type staticPolicies struct{ p *policy.Policy }

func (s staticPolicies) Load() *policy.Policy { return s.p }

func defaultPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	return compileFS(t, regosched.DefaultPolicy())
}

// compileFS loads and compiles the bundle in fsys.
func compileFS(t testing.TB, fsys fs.FS) *policy.Policy {
	t.Helper()
	b, err := policy.LoadFS(fsys, "test bundle")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func redis(name, role, shard, node string, prio int32) *placement.Pod {
	labels := map[string]string{
		"app.kubernetes.io/name":      "redis",
		"app.kubernetes.io/instance":  "cache",
		"app.kubernetes.io/component": role,
	}
	if shard != "" {
		labels["regosched.io/shard"] = shard
	}
	return &placement.Pod{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Labels: placement.NewLabels(labels), Priority: prio, Node: node}
}

func esData(name, node string) *placement.Pod {
	return &placement.Pod{Namespace: "logs", Name: name, UID: types.UID("uid-" + name), Node: node, Labels: placement.NewLabels(map[string]string{
		"app.kubernetes.io/name":      "elasticsearch",
		"app.kubernetes.io/instance":  "es",
		"app.kubernetes.io/component": "data",
	})}
}

// pendingPod is the Kubernetes object the scheduler sends for p.
func pendingPod(p *placement.Pod) *v1.Pod {
	prio := p.Priority
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels.Map()},
		Spec:       v1.PodSpec{Priority: &prio},
	}
}

// podObject is the bound Kubernetes pod behind p.
func podObject(p *placement.Pod) *v1.Pod {
	prio := p.Priority
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels.Map()},
		Spec:       v1.PodSpec{Priority: &prio, NodeName: p.Node},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
}

var zones = map[string]map[string]string{
	"node-1": {"topology.kubernetes.io/zone": "zone-a"},
	"node-2": {"topology.kubernetes.io/zone": "zone-b"},
	"node-3": {"topology.kubernetes.io/zone": "zone-c"},
	"node-4": {"topology.kubernetes.io/zone": "zone-a"},
}

// newDecider runs the real placement cache over a fake clientset that holds
// the nodes of zones and the given bound pods.
func newDecider(t testing.TB, bound []*placement.Pod, reg prometheus.Registerer) (*Decider, *fake.Clientset) {
	t.Helper()
	return newDeciderWith(t, bound, reg, Options{})
}

// newDeciderWith is newDecider with opts, whose Client and MaxWait it sets.
func newDeciderWith(t testing.TB, bound []*placement.Pod, reg prometheus.Registerer, opts Options) (*Decider, *fake.Clientset) {
	t.Helper()
	var objs []runtime.Object
	for name, labels := range zones {
		objs = append(objs, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	}
	for _, p := range bound {
		objs = append(objs, podObject(p))
	}
	client := fake.NewClientset(objs...)
	pol := defaultPolicy(t)
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
	d, err := New(cache, staticPolicies{pol}, log, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d, client
}

// names is a candidate list of its own: Filter moves the kept candidates
// to the front of the list it is given, as each request decodes its own.
func names(n ...string) *[]string {
	c := slices.Clone(n)
	return &c
}

func TestFilter(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	tests := []struct {
		name  string
		pod   *placement.Pod
		peers []*placement.Pod
		want  *extenderv1.ExtenderFilterResult
	}{
		{
			name: "pod no rule applies to passes every node",
			pod:  &placement.Pod{Namespace: "shop", Name: "web", UID: "web", Labels: placement.NewLabels(map[string]string{"app": "web"})},
			want: &extenderv1.ExtenderFilterResult{NodeNames: names(candidates...)},
		},
		{
			name:  "first master of a cluster passes every node",
			pod:   redis("cache-0-master", "master", "0", "", 0),
			peers: nil,
			want:  &extenderv1.ExtenderFilterResult{NodeNames: names(candidates...)},
		},
		{
			name: "two masters never share a node; equal priority is unresolvable",
			pod:  redis("cache-0-master", "master", "0", "", 0),
			peers: []*placement.Pod{
				redis("cache-1-master", "master", "1", "node-2", 0),
				redis("cache-1-replica", "replica", "1", "node-3", 0),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames:   names("node-1", "node-3", "node-4"),
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-2": "redis: master shop/cache-1-master of cluster cache already on this node",
				},
			},
		},
		{
			name: "a lower-priority conflicting peer can be preempted",
			pod:  redis("cache-0-master", "master", "0", "", 1000),
			peers: []*placement.Pod{
				redis("cache-1-master", "master", "1", "node-2", 0),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames: names("node-1", "node-3", "node-4"),
				FailedNodes: extenderv1.FailedNodesMap{
					"node-2": "redis: master shop/cache-1-master of cluster cache already on this node",
				},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "replica avoids the master of its own shard only",
			pod:  redis("cache-0-replica", "replica", "0", "", 0),
			peers: []*placement.Pod{
				redis("cache-0-master", "master", "0", "node-1", 0),
				redis("cache-1-master", "master", "1", "node-2", 0),
				redis("cache-1-replica", "replica", "1", "node-3", 0),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames:   names("node-2", "node-3", "node-4"),
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-1": "redis: master shop/cache-0-master of cluster cache (shard 0) already on this node",
				},
			},
		},
		{
			name: "several conflicts on one node are all named, in order",
			pod:  redis("cache-0-master", "master", "0", "", 0),
			peers: []*placement.Pod{
				redis("cache-1-master", "master", "1", "node-4", 0),
				redis("cache-0-replica", "replica", "0", "node-4", 0),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames:   names("node-1", "node-2", "node-3"),
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-4": "redis: master shop/cache-1-master of cluster cache already on this node; " +
						"redis: replica shop/cache-0-replica of cluster cache (shard 0) already on this node",
				},
			},
		},
		{
			name: "a conflict on a node that is not a candidate changes nothing",
			pod:  esData("es-data-2", ""),
			peers: []*placement.Pod{
				esData("es-data-0", "node-9"),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames:                  names(candidates...),
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDecider(t, tt.peers, prometheus.NewRegistry())
			got, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{
				Pod: pendingPod(tt.pod), NodeNames: names(candidates...),
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Filter() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterFullNodes(t *testing.T) {
	// A scheduler without nodeCacheCapable sends and expects Node objects.
	d, _ := newDecider(t, []*placement.Pod{
		esData("es-data-0", "node-1"), esData("es-data-1", "node-3"),
	}, prometheus.NewRegistry())
	nodes := &v1.NodeList{}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		nodes.Items = append(nodes.Items, v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: zones[n]}})
	}
	got, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(esData("es-data-2", "")), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	want := &extenderv1.ExtenderFilterResult{
		Nodes:       &v1.NodeList{Items: []v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: zones["node-2"]}}}},
		FailedNodes: extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
			"node-1": "elasticsearch: data logs/es-data-0 of cluster es already on this node",
			"node-3": "elasticsearch: data logs/es-data-1 of cluster es already on this node",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Filter() mismatch (-want +got):\n%s", diff)
	}
}

func TestFilterCountsDenials(t *testing.T) {
	reg := prometheus.NewRegistry()
	d, _ := newDecider(t, []*placement.Pod{esData("es-data-0", "node-1")}, reg)
	if _, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{
		Pod: pendingPod(esData("es-data-1", "")), NodeNames: names("node-1", "node-2"),
	}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(d.denials.WithLabelValues("elasticsearch-data", "false")); got != 1 {
		t.Errorf("denials{rule=elasticsearch-data,resolvable=false} = %v, want 1", got)
	}
}

func TestNoPolicy(t *testing.T) {
	cache, err := placement.New(fake.NewClientset(), nil, logrus.New())
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cache, staticPolicies{}, logrus.New(), prometheus.NewRegistry(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	args := &extenderv1.ExtenderArgs{Pod: pendingPod(esData("es-data-0", "")), NodeNames: names("node-1")}
	if _, err := d.Filter(context.Background(), args); !errors.Is(err, ErrNoPolicy) {
		t.Errorf("Filter() error = %v, want ErrNoPolicy", err)
	}
	if _, err := d.Prioritize(context.Background(), args, nil); !errors.Is(err, ErrNoPolicy) {
		t.Errorf("Prioritize() error = %v, want ErrNoPolicy", err)
	}
}

func TestPrioritize(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	tests := []struct {
		name  string
		pod   *placement.Pod
		peers []*placement.Pod
		want  extenderv1.HostPriorityList
	}{
		{
			name: "no peers, no preference",
			pod:  redis("cache-0-master", "master", "0", "", 0),
			want: extenderv1.HostPriorityList{},
		},
		{
			// Spread: node-1 and node-2 hold one cluster member each (weight 1).
			// Zones: zone-a holds a member of shard 0 (weight 2), so node-1 and
			// node-4 are penalised. Totals 3, 1, 0, 2: scores 0, 7, 10, 3.
			name: "spread over nodes and keep a shard's members in other zones",
			pod:  redis("cache-0-replica", "replica", "0", "", 0),
			peers: []*placement.Pod{
				redis("cache-0-master", "master", "0", "node-1", 0),
				redis("cache-1-master", "master", "1", "node-2", 0),
			},
			want: extenderv1.HostPriorityList{
				{Host: "node-2", Score: 7},
				{Host: "node-3", Score: 10},
				{Host: "node-4", Score: 3},
			},
		},
		{
			name: "ES data instances spread over nodes and zones",
			pod:  esData("es-data-1", ""),
			peers: []*placement.Pod{
				esData("es-data-0", "node-2"),
			},
			// node-2: spread 1 + zone 2 = 3; others 0.
			want: extenderv1.HostPriorityList{
				{Host: "node-1", Score: 10},
				{Host: "node-3", Score: 10},
				{Host: "node-4", Score: 10},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDecider(t, tt.peers, prometheus.NewRegistry())
			// A recycled list with an entry of a previous answer: overwritten.
			recycled := make(extenderv1.HostPriorityList, 1, 8)
			recycled[0] = extenderv1.HostPriority{Host: "stale", Score: 1}
			got, err := d.Prioritize(context.Background(), &extenderv1.ExtenderArgs{
				Pod: pendingPod(tt.pod), NodeNames: names(candidates...),
			}, recycled)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Prioritize() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrioritizeFullNodesUsesRequestLabels(t *testing.T) {
	// Labels come from the Node objects in the request, not from the cache
	// (which knows node-1 to node-4, none of them candidates here).
	d, _ := newDecider(t, []*placement.Pod{esData("es-data-0", "node-1")}, prometheus.NewRegistry())
	nodes := &v1.NodeList{Items: []v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{"topology.kubernetes.io/zone": "zone-b"}}},
	}}
	got, err := d.Prioritize(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(esData("es-data-1", "")), Nodes: nodes}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := extenderv1.HostPriorityList{{Host: "node-b", Score: 10}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prioritize() mismatch (-want +got):\n%s", diff)
	}
}

// TestFilterRefreshesStalePeersBeforeRefusingEverything emulates a cache
// that is behind the API: kube-scheduler retries a pod right after a peer
// was deleted or relabelled, before our informer has seen it. The cache
// (over one clientset) still holds es-data-0 on node-1; the API (another
// clientset) says otherwise.
func TestFilterRefreshesStalePeersBeforeRefusingEverything(t *testing.T) {
	peer := esData("es-data-0", "node-1")
	relabelled := podObject(peer)
	relabelled.Labels = map[string]string{
		"app.kubernetes.io/name": "elasticsearch", "app.kubernetes.io/instance": "es", "app.kubernetes.io/component": "master",
	}
	tests := []struct {
		name   string
		api    []runtime.Object
		wantOK bool
	}{
		{name: "peer deleted", api: nil, wantOK: true},
		{name: "peer relabelled to a role without the rule", api: []runtime.Object{relabelled}, wantOK: true},
		{name: "peer still there", api: []runtime.Object{podObject(peer)}, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDecider(t, []*placement.Pod{peer}, prometheus.NewRegistry())
			d.opts.Client = fake.NewClientset(tt.api...)
			got, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{
				Pod: pendingPod(esData("es-data-1", "")), NodeNames: names("node-1"),
			})
			if err != nil {
				t.Fatal(err)
			}
			if ok := len(*got.NodeNames) == 1; ok != tt.wantOK {
				t.Errorf("node-1 kept = %v, want %v (result %+v)", ok, tt.wantOK, got)
			}
		})
	}
}

// TestDenialsAreLogged: every hard denial leaves a structured decision log
// entry (pod, node, rule, reason, peer, policy revision), in filter and in
// bind's commit-time check alike.
func TestDenialsAreLogged(t *testing.T) {
	d, client := newDecider(t, []*placement.Pod{esData("es-data-0", "node-1")}, prometheus.NewRegistry())
	bindLikeAPIServer(client)
	log, hook := logtest.NewNullLogger()
	d.log = log
	pending := esData("es-data-1", "")
	createPending(t, client, pending)
	if _, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{
		Pod: pendingPod(pending), NodeNames: names("node-1", "node-2"),
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.Bind(context.Background(), bindArgs(pending, "node-1")); !errors.Is(err, ErrRefused) {
		t.Fatalf("Bind() error = %v, want ErrRefused", err)
	}
	const reason = "elasticsearch: data logs/es-data-0 of cluster es already on this node"
	revision := d.policies.Load().Revision()
	want := []logrus.Fields{
		{"verb": "filter", "pod": "logs/es-data-1", "node": "node-1", "rule": "elasticsearch-data", "reason": reason,
			"peer": "logs/es-data-0", "resolvable": false, "policyRevision": revision},
		{"verb": "bind", "pod": "logs/es-data-1", "node": "node-1", "rule": "elasticsearch-data", "reason": reason,
			"policyRevision": revision},
	}
	var got []logrus.Fields
	for _, e := range hook.AllEntries() {
		if e.Message == "denied" {
			if e.Level != logrus.InfoLevel {
				t.Errorf("denial logged at %v, want info", e.Level)
			}
			got = append(got, e.Data)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision log (-want +got):\n%s", diff)
	}
}

// TestFilterUsesPendingDescriptions: filter takes the pending pod's
// description made when the pod was created, and describes the pod itself
// when the request's pod differs from the one described (here relabelled to
// a role no rule concerns), so the decision always follows the request.
func TestFilterUsesPendingDescriptions(t *testing.T) {
	reg := prometheus.NewRegistry()
	d, client := newDecider(t, []*placement.Pod{esData("es-data-0", "node-1")}, reg)
	pending := esData("es-data-1", "")
	obj := pendingPod(pending)
	obj.Spec.SchedulerName = "regosched"
	if _, err := client.CoreV1().Pods(obj.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log, _ := logtest.NewNullLogger()
	views, err := placement.NewPending(client, "regosched", policy.PendingDescriber(d.policies.Load), log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); views.Shutdown() })
	views.Start(ctx)
	if !views.WaitForSync(ctx) || views.Len() != 1 {
		t.Fatalf("pending pods described: %d, want 1", views.Len())
	}
	d.opts.Pending = views

	relabelled := pendingPod(pending)
	relabelled.Labels["app.kubernetes.io/component"] = "master"
	tests := []struct {
		name      string
		pod       *v1.Pod
		wantKept  []string
		wantAhead float64
		wantNow   float64
	}{
		{"as created", pendingPod(pending), []string{"node-2"}, 1, 0},
		{"relabelled since", relabelled, []string{"node-1", "node-2"}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: names("node-1", "node-2")})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantKept, *got.NodeNames); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			ahead := testutil.ToFloat64(d.described.WithLabelValues("ahead"))
			now := testutil.ToFloat64(d.described.WithLabelValues("in_request"))
			if ahead != tt.wantAhead || now != tt.wantNow {
				t.Errorf("descriptions used: ahead %v, in request %v; want %v, %v", ahead, now, tt.wantAhead, tt.wantNow)
			}
		})
	}
}
