package placement

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterMetrics exposes the cache's size on reg.
func (c *Cache) RegisterMetrics(reg prometheus.Registerer) error {
	for _, g := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "regosched_cached_pods",
			Help: "Bound pods that belong to a policy group and are indexed for peer look-ups.",
		}, func() float64 { return float64(c.PodCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "regosched_cached_nodes",
			Help: "Nodes known to the placement cache.",
		}, func() float64 { return float64(c.NodeCount()) }),
	} {
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("registering placement metrics: %w", err)
		}
	}
	return nil
}
