package placement

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterMetrics(t *testing.T) {
	for _, feed := range feeds {
		t.Run(feed.name, func(t *testing.T) { testRegisterMetrics(t, feed.start) })
	}
}

func testRegisterMetrics(t *testing.T, start startFunc) {
	c, _ := start(t, byInstance, nil,
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", redis("cache", "replica"), onNode("node-2")),
		newPod("shop", "cache-pending", redis("cache", "replica")),
		newPod("shop", "web-0", nil, onNode("node-1")),
		newNode("node-1", nil), newNode("node-2", nil), newNode("node-3", nil))
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
