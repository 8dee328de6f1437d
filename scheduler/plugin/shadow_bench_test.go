package plugin

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/internal/ops/shadow"
	"github.com/regosched/regosched/test/fixture"
)

type staticPolicy struct{ p *policy.Policy }

func (s staticPolicy) Load() *policy.Policy { return s.p }

// BenchmarkCycleShadow is BenchmarkCycle's cycle (PreFilter, Filter on
// every node, PreScore, Score on every node; 1,000 pods of other
// clusters) with and without a shadow judging the same policy: off, no
// shadow; seam, a shadow whose worker does not run, so the candidates'
// collection, the request's copy and a dropping send alone; on, a shadow
// with its worker, which competes for the CPUs.
//
//	cd scheduler && go test -run '^$' -bench BenchmarkCycleShadow -count 6 ./plugin/
func BenchmarkCycleShadow(b *testing.B) {
	for _, nodes := range []int{100, 5000} {
		for _, mode := range []string{"off", "seam", "on"} {
			b.Run(fmt.Sprintf("nodes=%d/shadow=%s", nodes, mode), func(b *testing.B) {
				pl, infos := benchPlugin(b, nodes, 1000)
				if mode != "off" {
					log := logrus.New()
					log.SetOutput(io.Discard)
					sh, err := shadow.New(shadow.Config{
						Policies: staticPolicy{policytest.Default(b)}, Nodes: pl.cache,
						Registerer: prometheus.NewRegistry(), Log: log,
					})
					if err != nil {
						b.Fatal(err)
					}
					pl.shadow = sh
					if mode == "on" {
						ctx, cancel := context.WithCancel(context.Background())
						done := make(chan struct{})
						go func() { sh.Run(ctx); close(done) }()
						b.Cleanup(func() { cancel(); <-done })
					}
				}
				pod := fixture.MakePod().Namespace(ns).Name("cache-3-master").Redis("cache", "master", "3").Obj()
				ctx := context.Background()
				for b.Loop() {
					benchCycle(ctx, b, pl, pod, infos, nil)
				}
			})
		}
	}
}
