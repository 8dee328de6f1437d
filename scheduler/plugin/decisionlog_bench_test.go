package plugin

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/test/fixture"
)

// BenchmarkCycleDecisionLog is BenchmarkCycle's cycle (1,000 pods of other
// clusters) through every extension point the decision log uses
// (PreFilter, Filter on every node, PreScore, Score on every node,
// NormalizeScore, PostBind) with decision logs off; seam, a logger whose
// buffer is full (one event) and never flushed, so that each cycle builds
// and copies its events and Enqueue drops them: the cycle's own share; and
// on, every event also encoded on the logger's goroutine and written to
// io.Discard, that goroutine competing for the CPUs. docs/scheduler-plugin.md
// quotes it:
//
//	cd scheduler && go test -run '^$' -bench BenchmarkCycleDecisionLog -benchmem -count 8 ./plugin/ > /tmp/pdl.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /log /tmp/pdl.txt
func BenchmarkCycleDecisionLog(b *testing.B) {
	for _, nodes := range []int{100, 5000} {
		for _, mode := range []string{"off", "seam", "on"} {
			b.Run(fmt.Sprintf("nodes=%d/log=%s", nodes, mode), func(b *testing.B) {
				pl, infos := benchPlugin(b, nodes, 1000)
				if mode != "off" {
					log := logrus.New()
					log.SetOutput(io.Discard)
					cfg := decisionlog.Config{Sink: decisionlog.NewWriterSink(io.Discard), SampleRate: 1, Log: log}
					if mode == "seam" {
						cfg.MaxEvents, cfg.FlushBytes, cfg.FlushInterval = 1, 1<<30, time.Hour
					}
					l, err := decisionlog.New(cfg)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = l.Close(context.Background()) })
					pl.decisionLog = l
				}
				// A replica: denied beside its master, penalised by the soft
				// rules elsewhere, so every event has something to carry.
				pod := fixture.MakePod().Namespace(ns).Name("cache-1-replica").Redis("cache", "replica", "1").Priority(0).Node("").Obj()
				ctx := context.Background()
				scores := make(fwk.NodeScoreList, len(infos))
				for b.Loop() {
					cs := benchCycle(ctx, b, pl, pod, infos, scores)
					if st := pl.NormalizeScore(ctx, cs, pod, scores); !st.IsSuccess() {
						b.Fatal(st)
					}
					pl.PostBind(ctx, cs, pod, infos[len(infos)-1].Node().Name)
				}
			})
		}
	}
}
