package judge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
)

func redis(name, role, shard, node string) *model.Pod {
	return &model.Pod{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Node: node, Labels: model.NewLabels(map[string]string{
		"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache",
		"app.kubernetes.io/component": role, "regosched.io/shard": shard,
	})}
}

// TestBesideAndEvaluate: a pod described under the active policy is
// judged under another one by the same evaluation, among the peers the
// active judgement found; what it was given is left as it was.
func TestBesideAndEvaluate(t *testing.T) {
	def, stricter := policytest.Default(t), policytest.Variant(t, policytest.KeepClusterApart)
	peers := []*model.Pod{redis("m1", "master", "1", "node-2"), redis("r1", "replica", "1", "node-3")}
	web := &model.Pod{Namespace: "shop", Name: "web", UID: "uid-web", Labels: model.NewLabels(map[string]string{"app": "web"})}
	tests := []struct {
		name      string
		pol       *policy.Policy
		pod       *model.Pod
		wantPeers int
		want      map[string]string // node: rules, "," joined
	}{
		{name: "the default keeps masters apart", pol: def, pod: redis("m0", "master", "0", ""), wantPeers: 2,
			want: map[string]string{"node-2": "redis-masters"}},
		{name: "the stricter one keeps the whole cluster apart", pol: stricter, pod: redis("m0", "master", "0", ""), wantPeers: 2,
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
			v, err := judge.Evaluate(ctx, s, func(string) (map[string]string, bool) { return nil, true })
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			v.Nodes(func(node string, cs []model.Conflict) {
				var rules []string
				for _, c := range cs {
					rules = append(rules, c.Rule)
				}
				slices.Sort(rules)
				got[node] = strings.Join(slices.Compact(rules), ",")
			})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("conflicts by node (-want +got):\n%s", diff)
			}
			if len(s.Peers) != tt.wantPeers || s.Policy != tt.pol || pod != before {
				t.Errorf("peers %d (want %d), policy kept %t, pod unchanged %t", len(s.Peers), tt.wantPeers, s.Policy == tt.pol, pod == before)
			}
		})
	}
	if _, err := judge.Beside(context.Background(), nil, redis("m0", "master", "0", ""), peers); !errors.Is(err, judge.ErrNoPolicy) {
		t.Errorf("Beside(nil policy) = %v, want ErrNoPolicy", err)
	}
}
