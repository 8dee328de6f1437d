package placement

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
)

// domainsTTL is how long a count of domains is kept: zones come and go far
// more rarely, and a count is a scan of every node.
const domainsTTL = 10 * time.Second

// domainCounts keeps, per topology key, how many domains the known nodes
// make up, counted at most once per domainsTTL: a rule per domain is asked
// about on every filter call, and a scan of thousands of nodes on each
// would make a call's cost grow with the cluster.
type domainCounts struct {
	mu     sync.Mutex
	counts map[string]domainCount
}

type domainCount struct {
	n  int
	at time.Time
}

// Domains is how many domains of key the known nodes make up: the distinct
// values of the label key among them (under the hostname key, the nodes).
// Nodes without the label are in none. The count may be domainsTTL old.
func (c *Cache) Domains(key string) int {
	now := c.clock.Now()
	c.domains.mu.Lock()
	defer c.domains.mu.Unlock()
	if d, ok := c.domains.counts[key]; ok && now.Sub(d.at) < domainsTTL {
		return d.n
	}
	values := map[string]struct{}{}
	for _, obj := range c.nodes.GetIndexer().List() {
		n, ok := obj.(*corev1.Node)
		if !ok {
			continue
		}
		if key == model.HostnameKey {
			values[n.Name] = struct{}{}
		} else if v, ok := n.Labels[key]; ok {
			values[v] = struct{}{}
		}
	}
	if c.domains.counts == nil {
		c.domains.counts = map[string]domainCount{}
	}
	c.domains.counts[key] = domainCount{n: len(values), at: now}
	return len(values)
}
