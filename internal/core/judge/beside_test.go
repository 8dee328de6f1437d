package judge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/fixture"
)

// TestBesideAndEvaluate: a pod described under the active policy is
// judged under another one by the same evaluation, among the peers the
// active judgement found; what it was given is left as it was.
func TestBesideAndEvaluate(t *testing.T) {
	def, stricter := policytest.Default(t), policytest.Variant(t, policytest.KeepClusterApart)
	peers := []*model.Pod{
		fixture.MakePod().Namespace("shop").Name("m1").Redis("cache", "master", "1").Node("node-2").Model(),
		fixture.MakePod().Namespace("shop").Name("r1").Redis("cache", "replica", "1").Node("node-3").Model(),
	}
	web := fixture.MakePod().Namespace("shop").Name("web").Label("app", "web").Model()
	tests := []struct {
		name      string
		pol       *policy.Policy
		pod       *model.Pod
		wantPeers int
		want      map[string]string // node: rules, "," joined
	}{
		{name: "the default keeps masters apart", pol: def, pod: fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model(), wantPeers: 2,
			want: map[string]string{"node-2": "redis-masters"}},
		{name: "the stricter one keeps the whole cluster apart", pol: stricter, pod: fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model(), wantPeers: 2,
			want: map[string]string{"node-2": "redis-all-apart,redis-masters", "node-3": "redis-all-apart"}},
		{name: "a pod in no group of the policy has no peers", pol: stricter, pod: web, wantPeers: 0, want: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			// As the active judgement left it: described under the default.
			pod := *tt.pod
			if _, c, err := def.DescribePending(ctx, &pod); err != nil {
				t.Fatal(err)
			} else {
				pod.Claims = c
			}
			before := pod
			s, err := judge.Beside(ctx, tt.pol, &pod, peers)
			if err != nil {
				t.Fatal(err)
			}
			v, err := judge.Evaluate(ctx, s, fixture.Nodes{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			v.Domains(func(d model.Domain, cs []model.Conflict) {
				var rules []string
				for _, c := range cs {
					rules = append(rules, c.Rule)
				}
				slices.Sort(rules)
				got[d.Value] = strings.Join(slices.Compact(rules), ",")
			})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("conflicts by node (-want +got):\n%s", diff)
			}
			if len(s.Peers) != tt.wantPeers || s.Policy != tt.pol || pod != before {
				t.Errorf("peers %d (want %d), policy kept %t, pod unchanged %t", len(s.Peers), tt.wantPeers, s.Policy == tt.pol, pod == before)
			}
		})
	}
	m0 := fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Model()
	if _, err := judge.Beside(context.Background(), nil, m0, peers); !errors.Is(err, judge.ErrNoPolicy) {
		t.Errorf("Beside(nil policy) = %v, want ErrNoPolicy", err)
	}
}
