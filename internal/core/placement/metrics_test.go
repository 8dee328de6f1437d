package placement

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/regosched/regosched/test/fixture"
)

func TestRegisterMetrics(t *testing.T) {
	for _, feed := range feeds {
		t.Run(feed.name, func(t *testing.T) { testRegisterMetrics(t, feed.start) })
	}
}

func testRegisterMetrics(t *testing.T, start startFunc) {
	c, _ := start(t, byInstance, nil,
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-pending").Redis("cache", "replica", "").Obj(),
		fixture.MakePod().Namespace("shop").Name("web-0").Node("node-1").Obj(),
		fixture.MakeNode().Name("node-1").Obj(), fixture.MakeNode().Name("node-2").Obj(), fixture.MakeNode().Name("node-3").Obj())
	reg := prometheus.NewPedanticRegistry()
	if err := c.RegisterMetrics(reg); err != nil {
		t.Fatalf("RegisterMetrics() error = %v", err)
	}
	want := `
# HELP regosched_cached_nodes Nodes known to the placement cache.
# TYPE regosched_cached_nodes gauge
regosched_cached_nodes 3
# HELP regosched_cached_pods Bound pods that belong to a policy group and are indexed for peer look-ups.
# TYPE regosched_cached_pods gauge
regosched_cached_pods 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "regosched_cached_pods", "regosched_cached_nodes"); err != nil {
		t.Error(err)
	}
	if err := c.RegisterMetrics(reg); err == nil {
		t.Error("RegisterMetrics() twice on one registry: no error")
	}
}
