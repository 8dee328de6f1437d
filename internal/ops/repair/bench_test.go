package repair

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/regosched/regosched/internal/core/placement/placementtest"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/test/fixture"
)

// The benchmark cluster, as the audit's: 1,000 Redis Clusters of 3 shards
// of a master and a replica (Bitnami's chart, roles read live and
// labelled) and 1,000 Elasticsearch clusters of 4 data pods, 10,000 bound
// pods spread over 1,250 nodes as regosched places them.
const (
	benchNodes    = 1250
	benchClusters = 1000
)

func benchPods() []corev1.Pod {
	pods := make([]corev1.Pod, 0, benchClusters*10)
	add := func(ns, name string, node int, pod *fixture.PodWrapper) {
		pods = append(pods, *pod.Namespace(ns).Name(name).UID(ns + "/" + name).ResourceVersion(strconv.Itoa(1000 + len(pods))).
			Node(fmt.Sprintf("node-%04d", node%benchNodes)).Phase(corev1.PodRunning).Obj())
	}
	next := 0
	for c := range benchClusters {
		ns := fmt.Sprintf("ns-%02d", c%50)
		for s := range 3 {
			shard := "slot-" + strconv.Itoa(s*5461)
			for i, role := range []string{"master", "replica"} {
				add(ns, fmt.Sprintf("redis-%04d-%d-%d", c, s, i), next+2*s+i, fixture.MakePod().
					BitnamiRedisCluster(fmt.Sprintf("redis-%04d", c)).Label(fixture.LabelRole, role).Label(fixture.LabelShard, shard))
			}
		}
		next += 6
		for i := range 4 {
			add(ns, fmt.Sprintf("es-%04d-%d", c, i), next+i, fixture.MakePod().Elasticsearch(fmt.Sprintf("es-%04d", c), "data"))
		}
		next += 4
	}
	return pods
}

// BenchmarkPass measures what --repair adds to each audit pass when
// nothing is broken: reading its state, indexing the placed pods by name
// and watching their roles for failovers.
func BenchmarkPass(b *testing.B) {
	objs := make([]runtime.Object, benchNodes)
	for i := range objs {
		objs[i] = fixture.MakeNode().Name(fmt.Sprintf("node-%04d", i)).Obj()
	}
	client := fake.NewClientset(objs...)
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &corev1.PodList{Items: benchPods()}, nil
	})
	pol := defaultPolicy(b)
	current := func() *policy.Policy { return pol }
	cache := placementtest.Start(b, client, policy.Describer(current))
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx := context.Background()
	r, err := New(Config{Mode: On, Cache: cache, Policies: current, Kube: client, Namespace: "regosched-system",
		MaxPerHour: 6, Timeout: time.Minute, Log: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	report := audit.Report{Pods: benchClusters * 10}
	r.Pass(ctx, report) // the first pass only sees the roles
	b.ReportAllocs()
	for b.Loop() {
		r.Pass(ctx, report)
	}
	if n := len(cache.Indexed()); n != benchClusters*10 {
		b.Fatalf("the cache indexes %d pods, want %d", n, benchClusters*10)
	}
}
