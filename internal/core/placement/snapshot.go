package placement

import "github.com/regosched/regosched/internal/core/model"

// Indexed is a pod of the index with the groups it is indexed under.
// Neither is to be modified: both are shared with the cache.
type Indexed struct {
	Pod  *model.Pod
	Keys []string
}

// Indexed returns every indexed pod (bound, or assumed by the bind verb,
// and in at least one group) with its groups, in no particular order. It
// copies the index under the read lock and evaluates nothing, so that a
// caller walking every placement (the audit) holds back no informer event
// while it judges them; it is meant for that walk, not the request path.
func (c *Cache) Indexed() []Indexed {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Indexed, 0, len(c.byName))
	for _, e := range c.byName {
		out = append(out, Indexed{Pod: e.pod, Keys: e.keys})
	}
	return out
}
