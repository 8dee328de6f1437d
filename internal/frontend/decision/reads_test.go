package decision

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// countPodGets counts the pod reads made through client from now on.
func countPodGets(client *fake.Clientset) *atomic.Int32 {
	var n atomic.Int32
	client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		n.Add(1)
		return false, nil, nil // on to the tracker
	})
	return &n
}

// crowdedCluster is ten data pods of cluster es on each node of zones: a
// pending data pod of es fails every node, and so makes filter consider
// re-reading its peers.
func crowdedCluster() []*model.Pod {
	var bound []*model.Pod
	for i := range 40 {
		bound = append(bound,
			fixture.MakePod().Namespace("logs").Name(fmt.Sprintf("es-data-%d", 100+i)).Elasticsearch("es", "data").Node(fmt.Sprintf("node-%d", 1+i%4)).Model(),
		)
	}
	return bound
}

// A filter call costs few API reads: one for a pod the profile does not
// have (to find that out), and a few more, re-reading the peers that refuse
// every node, only for a pending pod of the profile.
func TestFilterReadsPerRequestAreBounded(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		inAPI    bool
		wantMax  int32
		wantMore bool // the pod's peers were re-read
	}{
		{name: "a forged pod the API does not have", wantMax: 1},
		{name: "a pending pod of the profile", inAPI: true, wantMax: 1 + judge.MaxRefresh, wantMore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, client := newDecider(t, crowdedCluster(), prometheus.NewRegistry())
			pending := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
			if tt.inAPI {
				if _, err := client.CoreV1().Pods(pending.Namespace).Create(ctx, profilePod(pending, testScheduler), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			gets := countPodGets(client)
			res, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(pending), NodeNames: names("node-1", "node-2", "node-3", "node-4")})
			if err != nil {
				t.Fatal(err)
			}
			if len(*res.NodeNames) != 0 {
				t.Fatalf("filter kept %v, want no node", *res.NodeNames)
			}
			got := gets.Load()
			if got > tt.wantMax || (got > 1) != tt.wantMore {
				t.Errorf("filter read %d pods, want at most %d (peers re-read: %v)", got, tt.wantMax, tt.wantMore)
			}
		})
	}
}

// The reads of all filter calls share one budget: a flood of forged calls
// spends at most its burst, and binds, which read with the same client,
// keep the rest of the client's rate limit.
func TestFilterReadsShareOneBudget(t *testing.T) {
	ctx := context.Background()
	d, client := newDeciderWith(t, crowdedCluster(), prometheus.NewRegistry(), Options{FilterReadRate: 0.001, FilterReadBurst: 3})
	gets := countPodGets(client)
	for i := range 10 {
		forged := fixture.MakePod().Namespace("logs").Name(fmt.Sprintf("es-data-%d", 900+i)).Elasticsearch("es", "data").Model()
		if _, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(forged), NodeNames: names("node-1", "node-2", "node-3", "node-4")}); err != nil {
			t.Fatal(err)
		}
	}
	if got := gets.Load(); got != 3 {
		t.Errorf("10 forged filter calls read %d pods, want the burst, 3", got)
	}
}

// The re-reads of a real pending pod's peers have a budget of their own:
// forged calls that spend the verification budget leave a pod freed by a
// deletion its re-reads (the e2e test TestDeletingAPodFreesItsNode failed
// one run in two when a burst of refusals shared one budget of 20), and
// the re-reads stop at their own budget.
func TestRefreshReadsHaveTheirOwnBudget(t *testing.T) {
	ctx := context.Background()
	d, client := newDeciderWith(t, crowdedCluster(), prometheus.NewRegistry(), Options{
		FilterReadRate: 0.001, FilterReadBurst: 13, RefreshReadRate: 0.001, RefreshReadBurst: 2 * judge.MaxRefresh,
	})
	nodes := names("node-1", "node-2", "node-3", "node-4")
	pending := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
	if _, err := client.CoreV1().Pods(pending.Namespace).Create(ctx, profilePod(pending, testScheduler), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gets := countPodGets(client)
	for i := range 10 {
		forged := fixture.MakePod().Namespace("logs").Name(fmt.Sprintf("es-data-%d", 900+i)).Elasticsearch("es", "data").Model()
		if _, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(forged), NodeNames: nodes}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(pending), NodeNames: nodes}); err != nil {
			t.Fatal(err)
		}
	}
	// 10 forged verifications, 3 of the real pod, then judge.MaxRefresh re-reads
	// at its first two refusals and none at the third.
	if got, want := gets.Load(), int32(10+3+2*judge.MaxRefresh); got != want {
		t.Errorf("read %d pods, want %d", got, want)
	}
}
