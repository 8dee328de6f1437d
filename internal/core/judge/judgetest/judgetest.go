// Package judgetest is the conformance table of regosched's front ends:
// the same pending pods among the same peers, with the answers both the
// extender (internal/frontend/decision) and regosched-scheduler's plugin must give
// under the default policy. Each front end runs every case through its own
// entry points; a case that passes through one and fails through the other
// is drift.
package judgetest

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/test/fixture"
)

// Outcome is a front end's answer for one node.
type Outcome string

const (
	// Pass: no hard rule keeps the pod off the node.
	Pass Outcome = "pass"
	// Preemptible: a hard rule does, and preemption may resolve it
	// (extender FailedNodes, plugin Unschedulable).
	Preemptible Outcome = "preemptible"
	// Unresolvable: a hard rule does, and preemption may not resolve it
	// (extender FailedAndUnresolvableNodes, plugin
	// UnschedulableAndUnresolvable).
	Unresolvable Outcome = "unresolvable"
)

// Case is one pending pod among its peers.
type Case struct {
	Name  string
	Nodes []*corev1.Node
	// Bound are the bound pods as the placement cache has them.
	Bound []*corev1.Pod
	// Now is what the API server says now of bound pods the cache has not
	// caught up with, by name: nil when the pod is deleted. The plugin's
	// scheduler snapshot has this view too; the cache does not.
	Now map[string]*corev1.Pod
	// StatefulSets are those of the API server: the size of a quorum's group.
	StatefulSets []*appsv1.StatefulSet
	// Pending is the pod to place; it exists in the API server as a
	// pending pod of the profile.
	Pending *corev1.Pod
	// Want is the outcome on every node.
	Want map[string]Outcome
	// Penalties are the soft rules' total penalty on each node (none when
	// absent); the front ends' scores are judge.Score of them, against the
	// highest among the nodes that pass.
	Penalties map[string]float64
	// Yields: the rules per zone yield for the pending pod, which gets a
	// judge.ZonesYielded Event (the only Event a filter records).
	Yields bool
}

// WantEvents is the reasons of the Events the front end records while it
// filters tc's pending pod, as a events.FakeRecorder formats them less
// their note: nil, or one ZonesYielded Warning.
func WantEvents(tc Case) []string {
	if !tc.Yields {
		return nil
	}
	return []string{"Warning " + judge.ZonesYielded}
}

// GotEvents drains r's Events to their type and reason, for WantEvents.
func GotEvents(r *events.FakeRecorder) []string {
	var out []string
	for len(r.Events) > 0 {
		f := strings.Fields(<-r.Events)
		out = append(out, strings.Join(f[:min(2, len(f))], " "))
	}
	return out
}

// APIReads answers the reads of a fake clientset's pods as the API server
// does now (tc.Now): a pod tc.Now has is returned as it says, or NotFound
// when it is nil; the others are left to the clientset, which lists and
// watches them as the placement cache has them.
func (tc Case) APIReads(a k8stesting.Action) (bool, runtime.Object, error) {
	name := a.(k8stesting.GetAction).GetName()
	now, ok := tc.Now[name]
	switch {
	case !ok:
		return false, nil, nil
	case now == nil:
		return true, nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	default:
		return true, now.DeepCopy(), nil
	}
}

// Namespace of every pod of the table.
const Namespace = "shop"

func threeZones() []*corev1.Node {
	return []*corev1.Node{
		fixture.MakeNode().Name("n1").Hostname().Zone("zone-a").Obj(),
		fixture.MakeNode().Name("n2").Hostname().Zone("zone-a").Obj(),
		fixture.MakeNode().Name("n3").Hostname().Zone("zone-b").Obj(),
	}
}

// fourNodesThreeZones: n1 and n2 in zone-a, n3 in zone-b, n4 in zone-c.
func fourNodesThreeZones() []*corev1.Node {
	return append(threeZones(), fixture.MakeNode().Name("n4").Hostname().Zone("zone-c").Obj())
}

// Objects are what the API server holds for tc besides its pending pod:
// nodes, StatefulSets and bound pods, in that order.
func (tc Case) Objects() []runtime.Object {
	var objs []runtime.Object
	for _, n := range tc.Nodes {
		objs = append(objs, n)
	}
	for _, s := range tc.StatefulSets {
		objs = append(objs, s)
	}
	for _, p := range tc.Bound {
		objs = append(objs, p)
	}
	return objs
}

func oneNode() []*corev1.Node {
	return []*corev1.Node{fixture.MakeNode().Name("n1").Hostname().Zone("zone-a").Obj()}
}

// relabelled is p with its component label set to role.
func relabelled(p *corev1.Pod, role string) *corev1.Pod {
	q := p.DeepCopy()
	q.Labels["app.kubernetes.io/component"] = role
	return q
}

// unbound is p before its binding: the cache holds such a pod only as a
// placement recorded ahead of it.
func unbound(p *corev1.Pod) *corev1.Pod {
	q := p.DeepCopy()
	q.Spec.NodeName = ""
	q.Status.Phase = corev1.PodPending
	return q
}

// Cases are the conformance table. The default policy's weights:
// node_spread 1 (any two pods of one Elasticsearch cluster, on one node),
// zone_apart 2 (two data pods of one cluster, in one zone).
func Cases() []Case {
	esData0 := fixture.MakePod().Namespace(Namespace).Name("es-data-0").Elasticsearch("es", "data").Node("n1").Obj()
	master1 := fixture.MakePod().Namespace(Namespace).Name("cache-1-master").Redis("cache", "master", "1").Node("n1").Obj()
	return []Case{
		{
			Name: "a pod in no group passes everywhere, with no preference", Nodes: threeZones(),
			Bound:   []*corev1.Pod{esData0},
			Pending: fixture.MakePod().Namespace(Namespace).Name("web").Label("app", "web").Obj(),
			Want:    map[string]Outcome{"n1": Pass, "n2": Pass, "n3": Pass},
		},
		{
			Name: "a data pod avoids a data pod of equal priority, unresolvably, and its zone softly", Nodes: threeZones(),
			Bound:     []*corev1.Pod{esData0},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("es-data-1").Elasticsearch("es", "data").Obj(),
			Want:      map[string]Outcome{"n1": Unresolvable, "n2": Pass, "n3": Pass},
			Penalties: map[string]float64{"n1": 3, "n2": 2},
		},
		{
			Name: "a data pod may preempt a lower-priority data pod", Nodes: threeZones(),
			Bound:     []*corev1.Pod{esData0},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("es-data-1").Elasticsearch("es", "data").Priority(1000).Obj(),
			Want:      map[string]Outcome{"n1": Preemptible, "n2": Pass, "n3": Pass},
			Penalties: map[string]float64{"n1": 3, "n2": 2},
		},
		{
			Name: "one higher-priority peer on a node makes it unresolvable", Nodes: threeZones(),
			Bound: []*corev1.Pod{
				esData0, fixture.MakePod().Namespace(Namespace).Name("es-data-2").Elasticsearch("es", "data").Priority(5000).Node("n1").Obj(),
			},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("es-data-1").Elasticsearch("es", "data").Priority(1000).Obj(),
			Want:      map[string]Outcome{"n1": Unresolvable, "n2": Pass, "n3": Pass},
			Penalties: map[string]float64{"n1": 6, "n2": 4},
		},
		{
			Name: "a master pod of the cluster is penalised on the node alone", Nodes: threeZones(),
			Bound:     []*corev1.Pod{esData0},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("es-master-0").Elasticsearch("es", "master").Obj(),
			Want:      map[string]Outcome{"n1": Pass, "n2": Pass, "n3": Pass},
			Penalties: map[string]float64{"n1": 1},
		},
		{
			// The extender once called this node resolvable and left the
			// master to its preempt verb; the plugin let default preemption
			// evict it.
			Name: "a Redis master the policy protects is never preemptible, even of lower priority", Nodes: threeZones(),
			Bound:   []*corev1.Pod{master1},
			Pending: fixture.MakePod().Namespace(Namespace).Name("cache-2-master").Redis("cache", "master", "2").Priority(1000).Obj(),
			Want:    map[string]Outcome{"n1": Unresolvable, "n2": Pass, "n3": Pass},
		},
		{
			Name: "a master may preempt a lower-priority replica of its own shard", Nodes: threeZones(),
			Bound: []*corev1.Pod{
				master1, fixture.MakePod().Namespace(Namespace).Name("cache-2-replica").Redis("cache", "replica", "2").Node("n2").Obj(),
			},
			Pending: fixture.MakePod().Namespace(Namespace).Name("cache-2-master").Redis("cache", "master", "2").Priority(1000).Obj(),
			Want:    map[string]Outcome{"n1": Unresolvable, "n2": Preemptible, "n3": Pass},
		},
		{
			// zone-a holds the master: n2 too, and the master stands
			// elsewhere, so no preemption on n2 can help.
			Name: "a replica stays out of its master's zone", Nodes: fourNodesThreeZones(),
			Bound:     []*corev1.Pod{master1},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("cache-1-replica").Redis("cache", "replica", "1").Priority(1000).Obj(),
			Want:      map[string]Outcome{"n1": Unresolvable, "n2": Unresolvable, "n3": Pass, "n4": Pass},
			Penalties: map[string]float64{"n1": 3, "n2": 2},
		},
		{
			Name: "a replica in the zone is no victim for its master on another node of it", Nodes: fourNodesThreeZones(),
			Bound:     []*corev1.Pod{fixture.MakePod().Namespace(Namespace).Name("cache-2-replica").Redis("cache", "replica", "2").Node("n2").Obj()},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("cache-2-master").Redis("cache", "master", "2").Priority(1000).Obj(),
			Want:      map[string]Outcome{"n1": Unresolvable, "n2": Preemptible, "n3": Pass, "n4": Pass},
			Penalties: map[string]float64{"n1": 2, "n2": 3},
		},
		{
			// Three masters: a zone may hold one (fewer than half).
			Name: "a third master stays out of the zones that hold one", Nodes: fourNodesThreeZones(),
			Bound: []*corev1.Pod{
				master1, fixture.MakePod().Namespace(Namespace).Name("cache-3-master").Redis("cache", "master", "3").Node("n3").Obj(),
			},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("cache-2-master").Redis("cache", "master", "2").Obj(),
			Want:      map[string]Outcome{"n1": Unresolvable, "n2": Unresolvable, "n3": Unresolvable, "n4": Pass},
			Penalties: map[string]float64{"n1": 1, "n3": 1},
		},
		{
			// Its StatefulSet says three: the second may not join the first's zone.
			Name: "a second master-eligible pod of a StatefulSet of three stays out of the first's zone", Nodes: fourNodesThreeZones(),
			StatefulSets: []*appsv1.StatefulSet{esMasters(3)},
			Bound:        []*corev1.Pod{fixture.MakePod().Namespace(Namespace).Name("es-master-0").Elasticsearch("es", "master").StatefulSet("es-master", "uid-es-master").Node("n1").Obj()},
			Pending:      fixture.MakePod().Namespace(Namespace).Name("es-master-1").Elasticsearch("es", "master").StatefulSet("es-master", "uid-es-master").Obj(),
			Want:         map[string]Outcome{"n1": Unresolvable, "n2": Unresolvable, "n3": Pass, "n4": Pass},
			Penalties:    map[string]float64{"n1": 1},
		},
		{
			// Zone-c's one node holds the replica of shard 2: every node is
			// refused, n2 by the quorum alone, which yields there rather
			// than leave the master pending forever.
			Name: "a quorum that would leave the pod nowhere yields", Nodes: fourNodesThreeZones(),
			Bound: []*corev1.Pod{
				master1, fixture.MakePod().Namespace(Namespace).Name("cache-3-master").Redis("cache", "master", "3").Node("n3").Obj(),
				fixture.MakePod().Namespace(Namespace).Name("cache-2-replica").Redis("cache", "replica", "2").Node("n4").Obj(),
			},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("cache-2-master").Redis("cache", "master", "2").Obj(),
			Want:      map[string]Outcome{"n1": Unresolvable, "n2": Pass, "n3": Unresolvable, "n4": Unresolvable},
			Penalties: map[string]float64{"n1": 1, "n3": 1, "n4": 3},
			Yields:    true,
		},
		{
			// The replica came first, into zone-a; the other zones' nodes
			// each hold a master: only n2 is left, refused by the replica's
			// zone alone, which yields there.
			Name: "a replica's zone that would leave its master nowhere yields", Nodes: fourNodesThreeZones(),
			Bound: []*corev1.Pod{
				fixture.MakePod().Namespace(Namespace).Name("cache-2-replica").Redis("cache", "replica", "2").Node("n1").Obj(),
				fixture.MakePod().Namespace(Namespace).Name("cache-1-master").Redis("cache", "master", "1").Node("n3").Obj(),
				fixture.MakePod().Namespace(Namespace).Name("cache-3-master").Redis("cache", "master", "3").Node("n4").Obj(),
			},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("cache-2-master").Redis("cache", "master", "2").Obj(),
			Want:      map[string]Outcome{"n1": Unresolvable, "n2": Pass, "n3": Unresolvable, "n4": Unresolvable},
			Penalties: map[string]float64{"n1": 3, "n2": 2, "n3": 1, "n4": 1},
			Yields:    true,
		},
		{
			// Over zones no placement can keep a majority through: placed, and reported.
			Name: "three masters over two zones: the quorum refuses nothing", Nodes: threeZones(),
			Bound: []*corev1.Pod{
				master1, fixture.MakePod().Namespace(Namespace).Name("cache-3-master").Redis("cache", "master", "3").Node("n3").Obj(),
			},
			Pending:   fixture.MakePod().Namespace(Namespace).Name("cache-2-master").Redis("cache", "master", "2").Obj(),
			Want:      map[string]Outcome{"n1": Unresolvable, "n2": Pass, "n3": Unresolvable},
			Penalties: map[string]float64{"n1": 1, "n3": 1},
		},
		{
			Name: "a peer deleted that the cache still holds does not count", Nodes: oneNode(),
			Bound:   []*corev1.Pod{esData0},
			Now:     map[string]*corev1.Pod{"es-data-0": nil},
			Pending: fixture.MakePod().Namespace(Namespace).Name("es-data-1").Elasticsearch("es", "data").Obj(),
			Want:    map[string]Outcome{"n1": Pass},
		},
		{
			Name: "a peer replaced under its name does not count", Nodes: oneNode(),
			Bound: []*corev1.Pod{esData0},
			Now: map[string]*corev1.Pod{"es-data-0": func() *corev1.Pod {
				p := unbound(esData0)
				p.UID = "uid-es-data-0-again"
				return p
			}()},
			Pending: fixture.MakePod().Namespace(Namespace).Name("es-data-1").Elasticsearch("es", "data").Obj(),
			Want:    map[string]Outcome{"n1": Pass},
		},
		{
			// The plugin once kept the cache's labels.
			Name: "a peer relabelled out of the rule does not count", Nodes: oneNode(),
			Bound:   []*corev1.Pod{esData0},
			Now:     map[string]*corev1.Pod{"es-data-0": relabelled(esData0, "master")},
			Pending: fixture.MakePod().Namespace(Namespace).Name("es-data-1").Elasticsearch("es", "data").Obj(),
			Want:    map[string]Outcome{"n1": Pass},
		},
		{
			Name: "a peer relabelled into another rule counts by its new labels", Nodes: oneNode(),
			Bound: []*corev1.Pod{master1},
			Now: map[string]*corev1.Pod{
				"cache-1-master": fixture.MakePod().Namespace(Namespace).Name("cache-1-master").Redis("cache", "replica", "2").Node("n1").Obj(),
			},
			Pending: fixture.MakePod().Namespace(Namespace).Name("cache-2-master").Redis("cache", "master", "2").Obj(),
			Want:    map[string]Outcome{"n1": Unresolvable},
		},
		{
			// The extender once dropped it, judging against a laxer view
			// than the binding about to land.
			Name: "a peer recorded before its binding still counts", Nodes: oneNode(),
			Bound:   []*corev1.Pod{esData0},
			Now:     map[string]*corev1.Pod{"es-data-0": unbound(esData0)},
			Pending: fixture.MakePod().Namespace(Namespace).Name("es-data-1").Elasticsearch("es", "data").Obj(),
			Want:    map[string]Outcome{"n1": Unresolvable},
		},
	}
}

// esMasters is StatefulSet es-master of replicas pods.
func esMasters(replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "es-master", UID: "uid-es-master"},
		Spec:       appsv1.StatefulSetSpec{Replicas: &replicas},
	}
}

// WantScores are the scores a front end must give the nodes passing, out of
// maxScore (judge.Score of tc.Penalties against the highest among them),
// without those that score 0: the extender leaves them out, as
// kube-scheduler scores a missing node 0. A pod with no penalty on any of
// them prefers none and gets no scores.
func WantScores(tc Case, passing []string, maxScore int64) map[string]int64 {
	var highest float64
	for _, n := range passing {
		highest = max(highest, tc.Penalties[n])
	}
	want := map[string]int64{}
	if highest == 0 {
		return want
	}
	for _, n := range passing {
		if s := judge.Score(tc.Penalties[n], highest, maxScore); s > 0 {
			want[n] = s
		}
	}
	return want
}
