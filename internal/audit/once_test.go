package audit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestOnce(t *testing.T) {
	pol := defaultPolicy(t)
	log, _ := logtest.NewNullLogger()
	client := fake.NewClientset(append(nodes("node-1", "node-2"),
		bound("shop", "cache-0", "node-1", redisLabels("cache", "master", "0")),
		bound("shop", "cache-1", "node-1", redisLabels("cache", "replica", "0")),
		bound("search", "logs-data-0", "node-2", esLabels("logs")),
	)...)
	got, err := Once(context.Background(), OnceOptions{Client: client, Policy: pol, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	want := Report{
		Violations: []Violation{{
			Rule: "redis-master-replica", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
			Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already on this node",
		}},
		PolicyRevision: pol.Revision(),
		Pods:           3,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Once() (-want +got):\n%s", diff)
	}
}

func TestOnceUnreachable(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	client := fake.NewClientset()
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	_, err := Once(context.Background(), OnceOptions{Client: client, Policy: defaultPolicy(t), Log: log, SyncTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "listing nodes from the API server: connection refused") {
		t.Errorf("Once() error = %v, want the failed node list", err)
	}
}
