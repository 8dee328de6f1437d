package audit

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/regosched/regosched/internal/core/placement/placementtest"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// The benchmark cluster: 1,000 Redis clusters of 3 shards of a master and
// a replica, and 1,000 Elasticsearch clusters of 4 pods, 10,000 bound pods
// on 1,248 nodes (a multiple of the 3 zones, so that the layout keeps its
// zones where it wraps around), in 50 namespaces.
const (
	benchNodes      = 1248
	benchClusters   = 1000
	benchNamespaces = 50
	redisShards     = 3
	esPods          = 4
	// One cluster in brokenEvery of each kind breaks a rule: 10 Redis
	// clusters with two masters on a node (and so two of three in a zone:
	// two violations each), 10 Elasticsearch clusters with two data pods
	// on a node.
	brokenEvery = 100
	violations  = 3 * benchClusters / brokenEvery
)

// benchPods lays out the benchmark cluster, nodes in zones 0, 1, 2 in
// turn. Spread: each cluster's pods on nodes of their own, as the
// scheduler with regosched places them (a master per zone, each replica
// in another zone than its master), so that only the broken clusters'
// pods share a node with a peer; every pod of a group is judged all the
// same (a rule per zone spans nodes). Crowded:
// every pod shares its node with a peer that breaks no rule (a master with
// another shard's replica, an Elasticsearch data pod with a master-eligible
// one), so that every pod is judged by the policy: the worst case.
func benchPods(crowded bool) []corev1.Pod {
	pods := make([]corev1.Pod, 0, benchClusters*(2*redisShards+esPods))
	add := func(ns, name string, node int, labels map[string]string) {
		pods = append(pods, *fixture.MakePod().Namespace(ns).Name(name).UID(ns + "/" + name).ResourceVersion(strconv.Itoa(1000 + len(pods))).
			Labels(labels).Node(fmt.Sprintf("node-%04d", node%benchNodes)).Phase(corev1.PodRunning).Obj())
	}
	next := 0 // first node of the next cluster
	for c := range benchClusters {
		ns, name := fmt.Sprintf("ns-%02d", c%benchNamespaces), fmt.Sprintf("redis-%04d", c)
		broken := c%brokenEvery == 0
		for s := range redisShards {
			master, replica := next+s, next+redisShards+(s+1)%redisShards
			if crowded {
				replica = next + (s+1)%redisShards
			}
			if broken && s == 1 {
				master = next // with shard 0's master
			}
			shard := strconv.Itoa(s)
			add(ns, fmt.Sprintf("%s-%d-master", name, s), master, fixture.RedisLabels(name, "master", shard))
			add(ns, fmt.Sprintf("%s-%d-replica", name, s), replica, fixture.RedisLabels(name, "replica", shard))
		}
		if crowded {
			next += redisShards
		} else {
			next += 2 * redisShards
		}
	}
	for c := range benchClusters {
		ns, name := fmt.Sprintf("ns-%02d", c%benchNamespaces), fmt.Sprintf("es-%04d", c)
		broken := c%brokenEvery == 0
		for i := range esPods {
			node := next + i
			labels := fixture.ElasticsearchLabels(name, "data")
			if crowded {
				node = next + i/2 // data i with master-eligible i+1
				if i%2 == 1 {
					labels["app.kubernetes.io/component"] = "master"
				}
			}
			if broken && i == esPods-1 {
				node = next // with data pod 0
				labels = fixture.ElasticsearchLabels(name, "data")
			}
			add(ns, fmt.Sprintf("%s-%d", name, i), node, labels)
		}
		if crowded {
			next += esPods / 2
		} else {
			next += esPods
		}
	}
	return pods
}

// benchAuditor is an Auditor over a placement cache of the benchmark
// cluster, fed by a fake clientset as an API server lists it.
func benchAuditor(b testing.TB, crowded bool) *Auditor {
	b.Helper()
	objs := make([]runtime.Object, benchNodes)
	for i := range objs {
		objs[i] = fixture.MakeNode().Name(fmt.Sprintf("node-%04d", i)).Zone(fmt.Sprintf("zone-%d", i%3)).Obj()
	}
	client := fake.NewClientset(objs...)
	// Listed through a reactor, as the extender's benchmarks do: the fake
	// tracker would keep full copies of the pods on the benchmark's heap.
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &corev1.PodList{Items: benchPods(crowded)}, nil
	})
	pol := defaultPolicy(b)
	current := func() *policy.Policy { return pol }
	log := logrus.New()
	log.SetOutput(io.Discard)
	cache := placementtest.Start(b, client, policy.Describer(current))
	a, err := New(Config{Cache: cache, Policies: current, Recorder: &recorder{}, Log: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkAudit measures one pass over 10,000 bound pods on 1,248 nodes:
// spread, where only the broken clusters' pods are judged; crowded, where
// every pod is, in a pass after one that judged the same pods (steady:
// their descriptions are reused) and in a first pass (cold: every pod
// described by the policy again).
func BenchmarkAudit(b *testing.B) {
	for _, bc := range []struct {
		name          string
		crowded, cold bool
	}{
		{name: "spread"},
		{name: "crowded/steady", crowded: true},
		{name: "crowded/cold", crowded: true, cold: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a := benchAuditor(b, bc.crowded)
			// A first pass, untimed: the steady state is the one after it.
			r, err := a.Run(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if bc.cold {
					a.described = nil
				}
				if r, err = a.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if r.Pods != benchClusters*(2*redisShards+esPods) || len(r.Violations) != violations {
				b.Fatalf("audited %d pods, found %d violations; want %d and %d",
					r.Pods, len(r.Violations), benchClusters*(2*redisShards+esPods), violations)
			}
			b.ReportMetric(float64(r.Pods), "pods")
			b.ReportMetric(float64(len(r.Violations)), "violations")
		})
	}
}
