package decision

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

func TestPrioritize(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	tests := []struct {
		name  string
		pod   *model.Pod
		peers []*model.Pod
		want  extenderv1.HostPriorityList
	}{
		{
			// nil, which the handler writes as [].
			name: "no peers, no preference",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model(),
			want: nil,
		},
		{
			// Spread: node-1 and node-2 hold one cluster member each (weight 1).
			// Zones: zone-a holds a member of shard 0 (weight 2), so node-1 and
			// node-4 are penalised. Totals 3, 1, 0, 2: scores 0, 7, 10, 3.
			name: "spread over nodes and keep a shard's members in other zones",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model(),
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),
			},
			want: extenderv1.HostPriorityList{
				{Host: "node-2", Score: 7},
				{Host: "node-3", Score: 10},
				{Host: "node-4", Score: 3},
			},
		},
		{
			name: "ES data instances spread over nodes and zones",
			pod:  fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-2").Model(),
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
			got, err := d.PrioritizeList(context.Background(), &extenderv1.ExtenderArgs{
				Pod: pendingPod(tt.pod), NodeNames: names(candidates...),
			})
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
	d, _ := newDecider(t,
		[]*model.Pod{fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model()},
		prometheus.NewRegistry(),
	)
	nodes := &v1.NodeList{Items: []v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{"topology.kubernetes.io/zone": "zone-b"}}},
	}}
	got, err := d.PrioritizeList(
		context.Background(),
		&extenderv1.ExtenderArgs{Pod: pendingPod(fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()), Nodes: nodes},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := extenderv1.HostPriorityList{{Host: "node-b", Score: 10}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prioritize() mismatch (-want +got):\n%s", diff)
	}
}
