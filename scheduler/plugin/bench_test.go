package plugin

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/test/fixture"
)

// BenchmarkCycle is the plugin's share of one scheduling cycle for a new
// Redis master whose cluster has 6 bound members: PreFilter, then Filter
// on every node, then PreScore and Score on every node. pods is the number
// of bound pods of other Redis clusters, which the cost must not follow.
func BenchmarkCycle(b *testing.B) {
	for _, size := range []struct{ nodes, pods int }{{100, 1000}, {5000, 1000}, {5000, 20000}} {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", size.nodes, size.pods), func(b *testing.B) {
			pl, infos := benchPlugin(b, size.nodes, size.pods)
			pod := fixture.MakePod().Namespace(ns).Name("cache-3-master").Redis("cache", "master", "3").Obj()
			ctx := context.Background()
			for b.Loop() {
				benchCycle(ctx, b, pl, pod, infos, nil)
			}
		})
	}
}

// benchCycle runs pod's scheduling cycle over infos as the framework does
// up to scoring: PreFilter, Filter on every node, PreScore, and Score on
// every node, into scores when it is not nil. It returns the cycle's state.
func benchCycle(ctx context.Context, b *testing.B, pl *Regosched, pod *corev1.Pod, infos []fwk.NodeInfo, scores fwk.NodeScoreList) fwk.CycleState {
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, cs, pod, infos); !st.IsSuccess() {
		b.Fatal(st)
	}
	for _, ni := range infos {
		_ = pl.Filter(ctx, cs, pod, ni)
	}
	if st := pl.PreScore(ctx, cs, pod, infos); !st.IsSuccess() {
		b.Fatal(st)
	}
	for i, ni := range infos {
		s, st := pl.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			b.Fatal(st)
		}
		if scores != nil {
			scores[i] = fwk.NodeScore{Name: ni.Node().Name, Score: s}
		}
	}
	return cs
}

// benchPlugin is the plugin over nodes nodes in three zones with cluster
// cache's 3 shards (a master and a replica each) bound on the first six,
// and pods pods of other Redis clusters bound round robin.
func benchPlugin(b *testing.B, nodes, pods int) (*Regosched, []fwk.NodeInfo) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var objs []runtime.Object
	var nodeList []*corev1.Node
	for i := range nodes {
		n := fixture.MakeNode().Name(fmt.Sprintf("n%04d", i)).Hostname().Zone(fmt.Sprintf("zone-%c", 'a'+i%3)).Obj()
		nodeList = append(nodeList, n)
		objs = append(objs, n)
	}
	var bound []*corev1.Pod
	for shard := range 3 {
		for j, role := range []string{"master", "replica"} {
			bound = append(bound,
				fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("cache-%d-%s", shard, role)).Redis("cache", role, fmt.Sprint(shard)).Node(nodeList[2*shard+j].Name).Obj(),
			)
		}
	}
	for i := range pods {
		bound = append(bound, fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("other-%d", i)).
			Redis(fmt.Sprintf("other-%d", i/6), "replica", fmt.Sprint(i%3)).Node(nodeList[i%nodes].Name).Obj())
	}
	for _, p := range bound {
		objs = append(objs, p)
	}
	snapshot := schedcache.NewSnapshot(bound, nodeList)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	pl, err := New(ctx, Config{
		Bundles: bundles.Config{Default: regosched.DefaultPolicy(), Log: log}, Client: fake.NewClientset(objs...),
		Snapshot: snapshot, SyncTimeout: 5 * time.Minute, Log: log,
	})
	if err != nil {
		b.Fatal(err)
	}
	return pl, infos
}
