package judge

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// noPeers is a cluster of three nodes in three zones, without pods.
type noPeers struct{ fixture.Nodes }

func (noPeers) Peers([]string, types.UID) []*model.Pod { return nil }

// Explain and verify name why a pod's live role is unknown: a
// host-networked pod is never asked (redisroles labels it so).
func TestUnprotectedNamesHostNetwork(t *testing.T) {
	pol, err := bundles.Options{}.LoadFS(context.Background(), regosched.DefaultPolicy(), "default policy")
	if err != nil {
		t.Fatal(err)
	}
	view := noPeers{fixture.Nodes{
		"a": {model.HostnameKey: "a", fixture.LabelZone: "z1"},
		"b": {model.HostnameKey: "b", fixture.LabelZone: "z2"},
		"c": {model.HostnameKey: "c", fixture.LabelZone: "z3"},
	}}
	redis := map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "master"}
	marked := map[string]string{policy.UnreadableLabel: policy.HostNetwork}
	for k, v := range redis {
		marked[k] = v
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{"own network", redis, nil},
		{"host network", marked, []string{policy.HostNetwork}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &model.Pod{Namespace: "shop", Name: "cache-0", UID: "u", Labels: model.NewLabels(tt.labels)}
			why, err := Unprotected(context.Background(), pol, view, pod)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range why {
				got = append(got, u.Reason)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Unprotected() reasons (-want +got):\n%s", diff)
			}
		})
	}
}
