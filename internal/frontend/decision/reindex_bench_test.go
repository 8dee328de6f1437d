package decision

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// BenchmarkBindWaitDuringReindex measures how long binds wait while a
// policy reload re-indexes 100,000 bound pods under the real default
// policy: each bind records its placement (Assume) every 10 ms during the
// re-index. It reports the re-index time and the longest and median wait.
//
//	go test -run '^$' -bench BenchmarkBindWaitDuringReindex -benchtime 1x ./internal/frontend/decision/
func BenchmarkBindWaitDuringReindex(b *testing.B) {
	const n = 100000
	objs := make([]runtime.Object, 0, n+500)
	for i := range 500 {
		objs = append(objs, fixture.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj())
	}
	for i := range n {
		role := "replica"
		if i%2 == 0 {
			role = "master"
		}
		objs = append(objs, fixture.MakePod().Namespace(fmt.Sprintf("ns-%d", i/6%50)).Name(fmt.Sprintf("cache-%d", i)).UID(fmt.Sprintf("uid-%d", i)).
			Redis(fmt.Sprintf("inst-%d", i/6), role, fmt.Sprint(i/2%3)).Node(fmt.Sprintf("node-%d", i%500)).Phase(v1.PodRunning).Obj())
	}
	client := fake.NewClientset(objs...)
	first, next := defaultPolicy(b), defaultPolicy(b)
	active := &switchable{}
	active.p.Store(first)
	log, _ := logtest.NewNullLogger()
	cache, err := placement.New(client, policy.Describer(active.Load), log)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); cache.Shutdown() }()
	cache.Start(ctx)
	if !cache.WaitForSync(ctx) {
		b.Fatal("cache did not sync")
	}
	if got := cache.PodCount(); got != n {
		b.Fatalf("PodCount() = %d, want %d", got, n)
	}
	b.ResetTimer()
	for range b.N {
		done := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			reindex(ctx, b, cache, policy.Describer(func() *policy.Policy { return next }), func() { active.p.Store(next) })
			done <- time.Since(start)
		}()
		var waits []time.Duration
		var took time.Duration
		for i := 0; ; i++ {
			select {
			case took = <-done:
			case <-time.After(10 * time.Millisecond):
				p := fixture.MakePod().Namespace("shop").Name(fmt.Sprintf("new-%d", i)).Node("node-1").Model()
				start := time.Now()
				assume(cache, p, []string{"shop/new"})
				waits = append(waits, time.Since(start))
				cache.Unassume(p)
				continue
			}
			break
		}
		slices.Sort(waits)
		b.ReportMetric(took.Seconds(), "reindex-s")
		if len(waits) > 0 {
			b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "max-bind-wait-ms")
			b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "median-bind-wait-ms")
			b.ReportMetric(float64(len(waits)), "binds")
		}
	}
}

// reindex and assume are the cache's re-index and Assume as of this version.
func reindex(ctx context.Context, b *testing.B, c *placement.Cache, keys placement.KeyFunc, store func()) {
	if err := c.SetKeyFunc(ctx, keys, store); err != nil {
		b.Error(err)
	}
}

func assume(c *placement.Cache, p *model.Pod, keys []string) { c.Assume(p, keys, nil) }
