package decision

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

func TestFilter(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	tests := []struct {
		name  string
		pod   *model.Pod
		peers []*model.Pod
		want  *extenderv1.ExtenderFilterResult
	}{
		{
			name: "pod no rule applies to passes every node",
			pod:  fixture.MakePod().Namespace("shop").Name("web").UID("web").Label("app", "web").Model(),
			want: &extenderv1.ExtenderFilterResult{NodeNames: names(candidates...)},
		},
		{
			name:  "first master of a cluster passes every node",
			pod:   fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model(),
			peers: nil,
			want:  &extenderv1.ExtenderFilterResult{NodeNames: names(candidates...)},
		},
		{
			name: "two masters never share a node; equal priority is unresolvable",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),
				fixture.MakePod().Namespace("shop").Name("cache-1-replica").Redis("cache", "replica", "1").Node("node-3").Model(),
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
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Priority(1000).Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("node-2").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames: names("node-1", "node-3", "node-4"),
				// The replica is alone in zone-b and stands on node-2: evicting it there resolves the rule per zone too.
				FailedNodes: extenderv1.FailedNodesMap{
					"node-2": "redis: replica shop/cache-0-replica of cluster cache (shard 0) already in zone zone-b; " +
						"redis: replica shop/cache-0-replica of cluster cache (shard 0) already on this node",
				},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			// The policy protects Redis masters from preemption: the extender
			// once reported the node resolvable and left the master to its
			// preempt verb, while the plugin had default preemption evict it.
			name: "a lower-priority master the policy protects cannot be preempted",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Priority(1000).Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),
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
			name: "replica avoids the master of its own shard only",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model(),
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),
				fixture.MakePod().Namespace("shop").Name("cache-1-replica").Redis("cache", "replica", "1").Node("node-3").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames:   names("node-2", "node-3"),
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-1": "redis: master shop/cache-0-master of cluster cache (shard 0) already in zone zone-a; " +
						"redis: master shop/cache-0-master of cluster cache (shard 0) already on this node",
					// node-4 shares zone-a with the master of the replica's shard, which stands elsewhere: no eviction on node-4 helps.
					"node-4": "redis: master shop/cache-0-master of cluster cache (shard 0) already in zone zone-a",
				},
			},
		},
		{
			name: "several conflicts on one node are all named, in order",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-4").Model(),
				fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("node-4").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames:   names("node-2", "node-3"),
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					// node-1 shares zone-a with the replica of the master's shard on node-4.
					"node-1": "redis: replica shop/cache-0-replica of cluster cache (shard 0) already in zone zone-a",
					"node-4": "redis: master shop/cache-1-master of cluster cache already on this node; " +
						"redis: replica shop/cache-0-replica of cluster cache (shard 0) already in zone zone-a; " +
						"redis: replica shop/cache-0-replica of cluster cache (shard 0) already on this node",
				},
			},
		},
		{
			name: "a conflict on a node that is not a candidate changes nothing",
			pod:  fixture.MakePod().Namespace("logs").Name("es-data-2").Elasticsearch("es", "data").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-9").Model(),
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
			got, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{
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

// TestFilterPerZone: a master and a replica of one shard keep each other
// out of their zones (node-1 and node-4 share zone-a); only the peer's own
// node can be freed by preemption.
func TestFilterPerZone(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	tests := []struct {
		name  string
		pod   *model.Pod
		peers []*model.Pod
		want  *extenderv1.ExtenderFilterResult
	}{
		{
			// The replica is of lower priority and unprotected: evicting it
			// frees node-1, while on node-4 it is no victim.
			name: "a master avoids its replica's zone; only the replica's node is resolvable",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Priority(1000).Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("node-1").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames: names("node-2", "node-3"),
				FailedNodes: extenderv1.FailedNodesMap{
					"node-1": "redis: replica shop/cache-0-replica of cluster cache (shard 0) already in zone zone-a; " +
						"redis: replica shop/cache-0-replica of cluster cache (shard 0) already on this node",
				},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-4": "redis: replica shop/cache-0-replica of cluster cache (shard 0) already in zone zone-a",
				},
			},
		},
		{
			name: "the master of another shard keeps no zone",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-1").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{NodeNames: names(candidates...)},
		},
		{
			// Per node a guess never loosens the rule, so node-1 is refused;
			// per zone the shard is exact, so node-4 is not.
			name: "a replica of unknown shard avoids a known shard's master on its node only",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-x-replica").Redis("cache", "replica", "").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames:   names("node-2", "node-3", "node-4"),
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-1": "redis: master shop/cache-0-master of cluster cache already on this node",
				},
			},
		},
		{
			name: "pods of one unknown shard keep each other out of their zones",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-x-replica").Redis("cache", "replica", "").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-x-master").Redis("cache", "master", "").Node("node-1").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames:   names("node-2", "node-3"),
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-1": "redis: master shop/cache-x-master of cluster cache already in zone zone-a; " +
						"redis: master shop/cache-x-master of cluster cache already on this node",
					"node-4": "redis: master shop/cache-x-master of cluster cache already in zone zone-a",
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDecider(t, tt.peers, prometheus.NewRegistry())
			got, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{
				Pod: pendingPod(tt.pod), NodeNames: names(candidates...),
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Filter() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterFullNodes(t *testing.T) {
	// A scheduler without nodeCacheCapable sends and expects Node objects.
	d, _ := newDecider(t, []*model.Pod{
		fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model(),
		fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Node("node-3").Model(),
	}, prometheus.NewRegistry())
	nodes := &v1.NodeList{}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		nodes.Items = append(nodes.Items, v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: zones[n]}})
	}
	got, err := d.FilterAnswer(
		context.Background(),
		&extenderv1.ExtenderArgs{Pod: pendingPod(fixture.MakePod().Namespace("logs").Name("es-data-2").Elasticsearch("es", "data").Model()), Nodes: nodes},
	)
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
	d, _ := newDecider(t, []*model.Pod{fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model()}, reg)
	if _, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{
		Pod: pendingPod(fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()), NodeNames: names("node-1", "node-2"),
	}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP regosched_filter_denials_total Candidate nodes a hard rule turned the pending pod away from, by rule and by whether preemption could resolve the conflict.
# TYPE regosched_filter_denials_total counter
regosched_filter_denials_total{resolvable="false",rule="elasticsearch-data"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "regosched_filter_denials_total"); err != nil {
		t.Error(err)
	}
}

// TestFilterCountsDenialsPerZoneOnce: a rule per zone is one denial per
// zone, however many of its nodes are candidates (node-1 and node-4 share
// zone-a); a rule per node, one per node.
func TestFilterCountsDenialsPerZoneOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	d, _ := newDecider(t, []*model.Pod{fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model()}, reg)
	if _, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{
		Pod: pendingPod(fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Model()), NodeNames: names("node-1", "node-2", "node-3", "node-4"),
	}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP regosched_filter_denials_total Candidate nodes a hard rule turned the pending pod away from, by rule and by whether preemption could resolve the conflict.
# TYPE regosched_filter_denials_total counter
regosched_filter_denials_total{resolvable="false",rule="redis-master-replica"} 1
regosched_filter_denials_total{resolvable="false",rule="redis-master-replica-zones"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "regosched_filter_denials_total"); err != nil {
		t.Error(err)
	}
}

// TestFilterRefreshesStalePeersBeforeRefusingEverything emulates a cache
// that is behind the API: kube-scheduler retries a pod right after a peer
// was deleted or relabelled, before our informer has seen it. The cache
// (over one clientset) still holds es-data-0 on node-1; the API (another
// clientset) says otherwise.
func TestFilterRefreshesStalePeersBeforeRefusingEverything(t *testing.T) {
	peer := fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model()
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
			d, _ := newDecider(t, []*model.Pod{peer}, prometheus.NewRegistry())
			// The pending pod is the profile's, in the API: only such a pod's
			// filter call may spend reads on its peers.
			pending := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
			d.opts.Client = fake.NewClientset(append(tt.api, profilePod(pending, testScheduler))...)
			if err := d.newJudge(nil); err != nil {
				t.Fatal(err)
			}
			got, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{
				Pod: pendingPod(pending), NodeNames: names("node-1"),
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

// TestFilterUsesPendingDescriptions: filter takes the pending pod's
// description made when the pod was created, and describes the pod itself
// when the request's pod differs from the one described (here relabelled to
// a role no rule concerns), so the decision always follows the request.
func TestFilterUsesPendingDescriptions(t *testing.T) {
	reg := prometheus.NewRegistry()
	d, client := newDecider(t,
		[]*model.Pod{fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model()},
		reg,
	)
	pending := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
	obj := pendingPod(pending)
	obj.Spec.SchedulerName = "regosched"
	if _, err := client.CoreV1().Pods(obj.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log, _ := logtest.NewNullLogger()
	views, err := placement.NewPending(client, "regosched", policy.PendingDescriber(d.policies.Load, nil), log)
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
	reg = prometheus.NewRegistry()
	if err := d.newJudge(reg); err != nil {
		t.Fatal(err)
	}

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
			got, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: names("node-1", "node-2")})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantKept, *got.NodeNames); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			ahead := counter(t, reg, "regosched_pending_descriptions_total", "when", "ahead")
			now := counter(t, reg, "regosched_pending_descriptions_total", "when", "in_request")
			if ahead != tt.wantAhead || now != tt.wantNow {
				t.Errorf("descriptions used: ahead %v, in request %v; want %v, %v", ahead, now, tt.wantAhead, tt.wantNow)
			}
		})
	}
}

// counter is the value of the counter name{label="value"} gathered from g
// (0 when it has no such series).
func counter(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestFilterFullNodesPerZone: with full nodes in the request, a node the
// cache does not hold yet is put in its zone by the request's labels: a
// rule per zone holds there too.
func TestFilterFullNodesPerZone(t *testing.T) {
	d, _ := newDecider(t, []*model.Pod{
		fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model(),
	}, prometheus.NewRegistry())
	nodes := &v1.NodeList{Items: []v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-3", Labels: zones["node-3"]}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-new", Labels: zones["node-1"]}}, // zone-a, not in the cache yet
	}}
	got, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{
		Pod: pendingPod(fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Model()), Nodes: nodes,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &extenderv1.ExtenderFilterResult{
		Nodes: &v1.NodeList{Items: nodes.Items[:1]},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
			"node-new": "redis: master shop/cache-0-master of cluster cache (shard 0) already in zone zone-a",
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Filter() mismatch (-want +got):\n%s", diff)
	}
}
