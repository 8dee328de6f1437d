package placement

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/test/fixture"
)

// newIdleCache is a cache that is never started: benchmarks feed it through
// its event handlers directly, which is faster than the fake informer.
func newIdleCache(tb testing.TB, keys KeyFunc) *Cache {
	tb.Helper()
	l, _ := logtest.NewNullLogger()
	c, err := New(fake.NewClientset(), keys, l)
	if err != nil {
		tb.Fatalf("New() error = %v", err)
	}
	return c
}

// benchPod is a bound pod as the API server sends it, before stripping: six
// labels plus the usual bulk.
func benchPod(i int, ns, instance string) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", instance, i)
	return fixture.MakePod().Namespace(ns).Name(name).UID(fmt.Sprintf("0b5e1e5a-0000-4000-8000-%012d", i)).
		ResourceVersion(fmt.Sprintf("%d", 100000+i)).
		Redis(instance, "replica", "").
		Label("app.kubernetes.io/managed-by", "helm").
		Label("controller-revision-hash", fmt.Sprintf("%s-5d8f7c9b4", instance)).
		Label("statefulset.kubernetes.io/pod-name", name).
		Annotation("checksum/config", strings.Repeat("f", 64)).
		Node(fmt.Sprintf("node-%d", i%500)).Priority(0).
		Container(corev1.Container{Name: "redis", Image: "redis:8", Args: []string{"--appendonly", "yes"}}).
		Phase(corev1.PodRunning).PodIP("10.0.0.1").Obj()
}

// fill stores and indexes n stripped pods as the informer would, with groups
// of six.
func fill(tb testing.TB, c *Cache, n int) {
	tb.Helper()
	store := c.pods.GetStore()
	for i := range n {
		obj, _ := stripPod(benchPod(i, fmt.Sprintf("ns-%d", i/6%50), fmt.Sprintf("inst-%d", i/6)))
		if err := store.Add(obj); err != nil {
			tb.Fatal(err)
		}
		c.writer().add(obj)
	}
}

// BenchmarkCacheMemory reports the heap kept per cached pod (informer store
// plus peer index) for 20,000 stripped pods with six labels each.
func BenchmarkCacheMemory(b *testing.B) {
	const n = 20000
	var total float64
	for range b.N {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := newIdleCache(b, byInstance)
		b.StartTimer()
		fill(b, c, n)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.PodCount() != n {
			b.Fatalf("PodCount() = %d, want %d", c.PodCount(), n)
		}
		runtime.KeepAlive(c)
		total += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		b.StartTimer()
	}
	b.ReportMetric(total/float64(b.N)/n, "bytes/pod")
}

// BenchmarkPeers shows that finding six peers costs the same with 1,000 or
// 100,000 unrelated pods in the cache.
func BenchmarkPeers(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			c := newIdleCache(b, byInstance)
			for i := range n {
				obj, _ := stripPod(benchPod(i, fmt.Sprintf("ns-%d", i/6%50), fmt.Sprintf("other-%d", i/6)))
				c.writer().add(obj)
			}
			for i := range 6 {
				obj, _ := stripPod(benchPod(i, "shop", "target"))
				c.writer().add(obj)
			}
			keys := []string{"shop/target"}
			if got := len(c.Peers(keys, "")); got != 6 {
				b.Fatalf("Peers() = %d pods, want 6", got)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if len(c.Peers(keys, "")) != 6 {
					b.Fatal("wrong peer count")
				}
			}
		})
	}
}

// BenchmarkNodeLabels is the per-candidate look-up prioritize makes for
// topology penalties, over 5,000 known nodes.
func BenchmarkNodeLabels(b *testing.B) {
	const n = 5000
	objs := make([]kruntime.Object, n)
	names := make([]string, n)
	for i := range objs {
		names[i] = fmt.Sprintf("node-%05d", i)
		objs[i] = fixture.MakeNode().Name(names[i]).Zone(fmt.Sprint(i % 3)).Obj()
	}
	c, _ := startCache(b, byInstance, nil, objs...)
	b.ReportAllocs()
	for b.Loop() {
		for _, name := range names {
			if _, ok := c.NodeLabels(name); !ok {
				b.Fatalf("node %s unknown", name)
			}
		}
	}
}
