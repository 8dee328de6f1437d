package audit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/regosched/regosched/test/fixture"
)

func TestOnce(t *testing.T) {
	pol := defaultPolicy(t)
	log, _ := logtest.NewNullLogger()
	client := fake.NewClientset(append(nodes("node-1", "node-2"),
		fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-1").Obj(),
		fixture.MakePod().Namespace("search").Name("logs-data-0").UID("uid-search-logs-data-0").Elasticsearch("logs", "data").Node("node-2").Obj(),
	)...)
	got, err := Once(context.Background(), OnceOptions{Client: client, Policy: pol, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	want := Report{
		// The pair on node-1 shares its zone-0 too, of the two zones.
		Violations: []Violation{
			{
				Rule: "redis-master-replica", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
				Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already on this node",
			},
			{
				Rule: "redis-master-replica-zones", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
				Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already in zone zone-0",
			},
		},
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

// TestOnceNamespace: -n reports the violations that involve a pod of the
// namespace, and counts its pods alone; every pod is still judged.
func TestOnceNamespace(t *testing.T) {
	pol := defaultPolicy(t)
	log, _ := logtest.NewNullLogger()
	objects := append(nodes("node-1", "node-2"),
		fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-1").Obj(),
		fixture.MakePod().Namespace("search").Name("logs-data-0").UID("uid-search-logs-data-0").Elasticsearch("logs", "data").Node("node-2").Obj(),
		fixture.MakePod().Namespace("search").Name("logs-data-1").UID("uid-search-logs-data-1").Elasticsearch("logs", "data").Node("node-2").Obj(),
	)
	// The pair on node-1 breaks the rule per node and, in zone-0, the rule per zone.
	shop := []Violation{
		{
			Rule: "redis-master-replica", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
			Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already on this node",
		},
		{
			Rule: "redis-master-replica-zones", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-1"},
			Reason: "redis: replica shop/cache-1 of cluster cache (shard 0) already in zone zone-0",
		},
	}
	for _, tc := range []struct {
		namespace string
		want      Report
	}{
		{namespace: "shop", want: Report{Violations: shop, Pods: 2}},
		{namespace: "nowhere", want: Report{Violations: []Violation{}}},
	} {
		t.Run(tc.namespace, func(t *testing.T) {
			got, err := Once(context.Background(), OnceOptions{
				Client: fake.NewClientset(objects...), Policy: pol, Log: log, Namespace: tc.namespace,
			})
			if err != nil {
				t.Fatal(err)
			}
			tc.want.PolicyRevision = pol.Revision()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Once() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOnceProgress: Once tells its progress, listing then judging, and
// ends with the complete counts.
func TestOnceProgress(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	client := fake.NewClientset(append(nodes("node-1", "node-2"),
		fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").UID("uid-shop-cache-1").Redis("cache", "replica", "0").Node("node-1").Obj(),
		fixture.MakePod().Namespace("search").Name("logs-data-0").UID("uid-search-logs-data-0").Elasticsearch("logs", "data").Node("node-2").Obj(),
	)...)
	var got []Progress
	_, err := Once(context.Background(), OnceOptions{Client: client, Policy: defaultPolicy(t), Log: log,
		Progress: func(p Progress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	// The listing's counts depend on when the cache was polled; from the
	// complete lists on, the progress is exact: two pods share node-1.
	i := slices.IndexFunc(got, func(p Progress) bool { return p.Listed })
	if i < 1 {
		t.Fatalf("progress = %+v, want listing first, then the lists complete", got)
	}
	want := []Progress{
		{Listed: true, Pods: 3, Nodes: 2},
		{Listed: true, Pods: 3, Nodes: 2, Judged: 0, ToJudge: 2},
		{Listed: true, Pods: 3, Nodes: 2, Judged: 1, ToJudge: 2},
		{Listed: true, Pods: 3, Nodes: 2, Judged: 2, ToJudge: 2},
	}
	if diff := cmp.Diff(want, got[i:]); diff != "" {
		t.Errorf("progress once listed (-want +got):\n%s", diff)
	}
}
