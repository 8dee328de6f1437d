package policy

import (
	"context"
	"testing"

	regosched "github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/placement"
)

// A bound pod's facts are the same after a change of labels no rule reads,
// and differ after a change of role or under another policy.
func TestFactsSameAs(t *testing.T) {
	ctx := context.Background()
	pol := mustDefaultPolicy(t)
	b, err := LoadFS(regosched.DefaultPolicy(), "default policy")
	if err != nil {
		t.Fatal(err)
	}
	other, err := Compile(ctx, b) // the same bundle, another policy
	if err != nil {
		t.Fatal(err)
	}
	describe := func(p *Policy, labels map[string]string) any {
		t.Helper()
		pod := &placement.Pod{Namespace: "shop", Name: "cache-0", UID: "u1", Node: "node-1", Labels: placement.NewLabels(labels)}
		_, facts, err := p.DescribePeer(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		return facts
	}
	replica := map[string]string{
		"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache",
		"app.kubernetes.io/component": "replica", "regosched.io/shard": "0",
	}
	with := func(k, v string) map[string]string {
		out := map[string]string{k: v}
		for k, v := range replica {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
		return out
	}
	base := describe(pol, replica)
	tests := []struct {
		name  string
		other any
		want  bool
	}{
		{"described again", describe(pol, replica), true},
		{"the zone the API server adds at binding", describe(pol, with("topology.kubernetes.io/zone", "zone-a")), true},
		{"another role", describe(pol, with("app.kubernetes.io/component", "master")), false},
		{"another shard", describe(pol, with("regosched.io/shard", "1")), false},
		{"another policy", describe(other, replica), false},
		{"no facts", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := base.(placement.SameFacts)
			if !ok {
				t.Fatalf("facts %T do not implement placement.SameFacts", base)
			}
			if got := f.SameAs(tt.other); got != tt.want {
				t.Errorf("SameAs = %v, want %v", got, tt.want)
			}
		})
	}
}
