package policy

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/core/model"
)

func TestLiveRoles(t *testing.T) {
	pol := mustDefaultPolicy(t)
	labels, ok := pol.LiveLabels()
	if diff := cmp.Diff(LiveLabels{Role: "regosched.io/role", Shard: "regosched.io/shard"}, labels); !ok || diff != "" {
		t.Errorf("LiveLabels() = %v (ok %v), mismatch (-want +got):\n%s", labels, ok, diff)
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   []LiveSource
	}{
		{"a Redis pod is asked", map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "master"},
			[]LiveSource{{Workload: "redis", Source: "redis", PortNames: []string{"redis", "tcp-redis"}, Port: 6379}}},
		{"an Elasticsearch pod is not", map[string]string{"app.kubernetes.io/name": "elasticsearch", "app.kubernetes.io/instance": "logs"}, nil},
		{"nor an unrelated pod", map[string]string{"app": "web"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pol.LiveRoles(context.Background(), &model.Pod{Namespace: "shop", Name: "p", UID: "u", Labels: model.NewLabels(tt.labels)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LiveRoles() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
