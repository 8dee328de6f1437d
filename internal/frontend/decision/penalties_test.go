package decision

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// With the soft rules folded into filter, filter keeps the candidates of
// the lowest total penalty among those no hard rule turns away: the same
// totals TestPrioritize scores.
func TestFilterSoftInFilter(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	tests := []struct {
		name  string
		pod   *model.Pod
		peers []*model.Pod
		want  *extenderv1.ExtenderFilterResult
	}{
		{
			name: "no peers: every candidate",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model(),
			want: &extenderv1.ExtenderFilterResult{NodeNames: names(candidates...)},
		},
		{
			// node-1 holds the master of the replica's shard and node-4
			// shares its zone-a (hard); of the others, node-2's total is 1
			// and node-3's 0 (see TestPrioritize).
			name: "the best of the candidates left",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model(),
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames: names("node-3"),
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-1": "redis: master shop/cache-0-master of cluster cache (shard 0) already in zone zone-a; " +
						"redis: master shop/cache-0-master of cluster cache (shard 0) already on this node",
					"node-2": "soft rules: penalty 1 here, 0 on the nodes kept",
					"node-4": "redis: master shop/cache-0-master of cluster cache (shard 0) already in zone zone-a",
				},
			},
		},
		{
			// No hard rule turns any candidate away: the soft tier alone
			// refuses, and the answer still has its refused maps (a nil map
			// here panicked every filter call with soft rules and no conflict).
			name: "soft rules alone refuse",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),
			},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames: names("node-1", "node-3", "node-4"),
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-2": "soft rules: penalty 1 here, 0 on the nodes kept",
				},
			},
		},
		{
			name:  "equal penalties: no candidate turned away for them",
			pod:   fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model(),
			peers: []*model.Pod{fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-2").Model()},
			want: &extenderv1.ExtenderFilterResult{
				NodeNames: names("node-1", "node-3", "node-4"),
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"node-2": "elasticsearch: data logs/es-data-0 of cluster es already on this node",
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDeciderWith(t, tt.peers, prometheus.NewRegistry(), Options{SoftInFilter: true})
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
