package audit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/regosched/regosched/test/fixture"
)

// TestRunQuorumSize: the audit sizes elasticsearch-master-quorum's group as
// the front ends do, the largest of the members counted and the replicas
// of their StatefulSet, and judges two of three masters in one zone by it.
func TestRunQuorumSize(t *testing.T) {
	master := func(i, node string) runtime.Object {
		return fixture.MakePod().Namespace("search").Name("logs-master-"+i).UID("uid-search-logs-master-"+i).
			Elasticsearch("logs", "master").StatefulSet("logs-master", "uid-logs-master").Node(node).Obj()
	}
	statefulSet := func(replicas int32) runtime.Object {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "search", Name: "logs-master", UID: "uid-logs-master"},
			Spec:       appsv1.StatefulSetSpec{Replicas: &replicas},
		}
	}
	// node-1 and node-4 are in zone-0, node-2 in zone-1.
	masters := []runtime.Object{master("0", "node-1"), master("1", "node-4"), master("2", "node-2")}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want []Violation
	}{
		{
			name: "three masters, two in zone-0: fewer than half of three is one",
			objs: masters,
			want: []Violation{{
				Rule: "elasticsearch-master-quorum", Namespace: "search", Node: "node-1", Pods: []string{"search/logs-master-0", "search/logs-master-1"},
				Reason: "elasticsearch: master search/logs-master-1 of cluster logs already in zone zone-0: with this pod 2 of 3 there, fewer than half may be",
			}},
		},
		{
			name: "the same masters, of a StatefulSet of three",
			objs: append([]runtime.Object{statefulSet(3)}, masters...),
			want: []Violation{{
				Rule: "elasticsearch-master-quorum", Namespace: "search", Node: "node-1", Pods: []string{"search/logs-master-0", "search/logs-master-1"},
				Reason: "elasticsearch: master search/logs-master-1 of cluster logs already in zone zone-0: with this pod 2 of 3 there, fewer than half may be",
			}},
		},
		{
			// Five may hold two per zone.
			name: "the same masters, of a StatefulSet of five: no violation",
			objs: append([]runtime.Object{statefulSet(5)}, masters...),
		},
		{
			// Four may hold one per zone, which three zones cannot meet.
			name: "the same masters, of a StatefulSet of four: infeasible over three zones, no violation",
			objs: append([]runtime.Object{statefulSet(4)}, masters...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHarness(t, append(nodes("node-1", "node-2", "node-3", "node-4"), tc.objs...)...)
			got := f.run(t)
			want := tc.want
			if want == nil {
				want = []Violation{}
			}
			if diff := cmp.Diff(want, got.Violations); diff != "" {
				t.Errorf("Run() violations (-want +got):\n%s", diff)
			}
			if got.Pods != 3 {
				t.Errorf("Run() judged %d pods, want 3", got.Pods)
			}
		})
	}
}
