package plugin

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/test/fixture"
)

func TestScore(t *testing.T) {
	f := newHarness(t)
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
			pod:  fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Obj(),
			want: map[string]int64{"n1": 0, "n2": 67, "n3": 100},
		},
		{
			name: "a pod in no group has no preference",
			pod:  fixture.MakePod().Namespace(ns).Name("web").Schedulable().Obj(),
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
