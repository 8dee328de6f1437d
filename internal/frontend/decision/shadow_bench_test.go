package decision

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/ops/shadow"
	"github.com/regosched/regosched/test/fixture"
)

// BenchmarkFilterShadow measures Filter with and without a shadow judging
// the same policy beside it: the shadow must stay off the verb's latency,
// so the difference is the request's copy (pod, peers, candidates, denied
// nodes) and the queue send, and a full queue drops (reported per op).
//
//	go test -run '^$' -bench BenchmarkFilterShadow -count 6 ./internal/frontend/decision/
func BenchmarkFilterShadow(b *testing.B) {
	peers, pod := benchCluster()
	for _, nodes := range []int{100, 5000} {
		candidates := benchCandidates(nodes)
		// off: no shadow; seam: a shadow whose workers do not run, so the
		// copy and a dropping send alone; on: a shadow with its workers.
		for _, mode := range []string{"off", "seam", "on"} {
			b.Run(fmt.Sprintf("nodes=%d/shadow=%s", nodes, mode), func(b *testing.B) {
				var opts Options
				var sh *shadow.Shadow
				reg := prometheus.NewRegistry()
				if mode != "off" {
					log := logrus.New()
					log.SetOutput(io.Discard)
					var err error
					sh, err = shadow.New(shadow.Config{
						Policies: staticPolicies{defaultPolicy(b)}, Nodes: fixture.Nodes{},
						Registerer: reg, Log: log,
					})
					if err != nil {
						b.Fatal(err)
					}
					opts.Shadow = sh
				}
				if mode == "on" {
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan struct{})
					go func() { sh.Run(ctx); close(done) }()
					b.Cleanup(func() { cancel(); <-done })
				}
				d, _ := newDeciderWith(b, peers, prometheus.NewRegistry(), opts)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					args := &extenderv1.ExtenderArgs{Pod: pendingPod(pod), NodeNames: &candidates}
					if _, err := d.Filter(ctx, args); err != nil {
						b.Fatal(err)
					}
				}
				if sh != nil {
					b.ReportMetric(counterOf(b, reg, "regosched_shadow_dropped_total")/float64(b.N), "dropped/op")
				}
			})
		}
	}
}

// counterOf sums the counter name's children in reg.
func counterOf(b *testing.B, reg prometheus.Gatherer, name string) float64 {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
