package decision

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// BenchmarkDecisionLog measures filter and prioritize with decision logs
// off; seam, a logger whose buffer is full (one event) and never flushed,
// so that each call builds and copies its event and Enqueue drops it: the
// verb's own share; and on, every decision logged, encoded on the
// logger's goroutine and written to io.Discard, which competes with the
// verbs for the CPUs. Building the event is bounded by
// decisionlog.MaxListed however many candidates. docs/decision-logs.md
// quotes it:
//
//	go test -run '^$' -bench BenchmarkDecisionLog -count 10 ./internal/frontend/decision/ > /tmp/dl.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /log /tmp/dl.txt
func BenchmarkDecisionLog(b *testing.B) {
	peers, pod := benchCluster()
	verbs := []struct {
		name string
		call func(*Decider, *extenderv1.ExtenderArgs) error
	}{
		{"filter", func(d *Decider, args *extenderv1.ExtenderArgs) error {
			_, err := d.Filter(context.Background(), args)
			return err
		}},
		{"prioritize", func(d *Decider, args *extenderv1.ExtenderArgs) error {
			scores, err := d.Prioritize(context.Background(), args)
			// Ranged over as the handler does: the event is given at its end.
			for range scores {
			}
			return err
		}},
	}
	for _, verb := range verbs {
		for _, nodes := range []int{100, 5000} {
			candidates := benchCandidates(nodes)
			for _, mode := range []string{"off", "seam", "on"} {
				b.Run(fmt.Sprintf("verb=%s/nodes=%d/log=%s", verb.name, nodes, mode), func(b *testing.B) {
					var opts Options
					var l *decisionlog.Logger
					if mode != "off" {
						log := logrus.New()
						log.SetOutput(io.Discard)
						cfg := decisionlog.Config{
							Sink: decisionlog.NewWriterSink(io.Discard), SampleRate: 1, InstanceID: "bench",
							Registerer: prometheus.NewRegistry(), Log: log,
						}
						if mode == "seam" {
							cfg.MaxEvents, cfg.FlushBytes, cfg.FlushInterval = 1, 1<<30, time.Hour
						}
						var err error
						if l, err = decisionlog.New(cfg); err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { _ = l.Close(context.Background()) })
						opts.DecisionLog = l
					}
					d, _ := newDeciderWith(b, peers, prometheus.NewRegistry(), opts)
					b.ReportAllocs()
					for b.Loop() {
						args := &extenderv1.ExtenderArgs{Pod: pendingPod(pod), NodeNames: &candidates}
						if err := verb.call(d, args); err != nil {
							b.Fatal(err)
						}
					}
					if l != nil {
						var dropped float64
						for _, r := range []string{decisionlog.ReasonBufferEvents, decisionlog.ReasonBufferBytes} {
							dropped += testutil.ToFloat64(l.Dropped().WithLabelValues(r))
						}
						b.ReportMetric(dropped/float64(b.N), "dropped/op")
					}
				})
			}
		}
	}
}
