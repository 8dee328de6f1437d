package decision

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

func TestScoreCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newScoreCache(2 * time.Second)
	c.now = func() time.Time { return now }
	pol, other := &policy.Policy{}, &policy.Policy{}
	pens := []model.Penalty{{TopologyKey: model.HostnameKey, Value: "node-1", Weight: 1}}

	c.put("a", pol, pens)
	if got, ok := c.take("a", pol); !ok || !cmp.Equal(pens, got) {
		t.Errorf("take() = %v, %v; want the stored penalties", got, ok)
	}
	if _, ok := c.take("a", pol); ok {
		t.Error("an entry was used twice")
	}
	c.put("b", pol, pens)
	if _, ok := c.take("b", other); ok {
		t.Error("an entry made under another policy was used")
	}
	c.put("c", pol, pens)
	now = now.Add(3 * time.Second)
	if _, ok := c.take("c", pol); ok {
		t.Error("an expired entry was used")
	}
	for i := range sweepAbove + 10 {
		c.put(k8stypes.UID(strconv.Itoa(i)), pol, nil)
	}
	now = now.Add(3 * time.Second)
	c.put("fresh", pol, nil)
	if n := len(c.entries); n != 1 {
		t.Errorf("%d entries after a sweep, want 1", n)
	}
}

// TestPrioritizeUsesFilterPenalties: prioritize scores with what filter
// evaluated for the pod, not with a second evaluation: a peer bound in
// between changes nothing until the next filter call.
func TestPrioritizeUsesFilterPenalties(t *testing.T) {
	ctx := context.Background()
	d, client := newDecider(t,
		[]*model.Pod{fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model()},
		prometheus.NewRegistry(),
	)
	pod := pendingPod(fixture.MakePod().Namespace("logs").Name("es-data-9").Elasticsearch("es", "data").Model())
	// Each call has a request of its own, as the scheduler's would be decoded.
	args := func() *extenderv1.ExtenderArgs {
		return &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("node-1", "node-2", "node-3")}
	}
	if _, err := d.FilterAnswer(ctx, args()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("logs").Create(ctx,
		podObject(fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Node("node-2").Model()),
		metav1.CreateOptions{},
	); err != nil {
		t.Fatal(err)
	}
	// Wait until the cache holds the new peer, then compare.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(d.placements.Peers([]string{"elasticsearch/logs/es"}, "")) == 2, nil
	}); err != nil {
		t.Fatalf("cache never saw es-data-1: %v", err)
	}
	got, err := d.PrioritizeList(ctx, args())
	if err != nil {
		t.Fatal(err)
	}
	// From filter time: only es-data-0 on node-1 (zone-a) counts.
	want := extenderv1.HostPriorityList{{Host: "node-2", Score: 10}, {Host: "node-3", Score: 10}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prioritize() after filter mismatch (-want +got):\n%s", diff)
	}
	// Without a preceding filter, prioritize evaluates the current peers.
	got, err = d.PrioritizeList(ctx, args())
	if err != nil {
		t.Fatal(err)
	}
	want = extenderv1.HostPriorityList{{Host: "node-3", Score: 10}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prioritize() without filter mismatch (-want +got):\n%s", diff)
	}
}
