package placement

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
)

// Peers returns the cached pods that share at least one of keys, except the
// pod whose UID is self, sorted by namespace and name. The cost depends on
// the number of peers only.
func (c *Cache) Peers(keys []string, self types.UID) []*model.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []*model.Pod
	for i, k := range keys {
		for _, p := range c.groups[k] {
			if p.UID == self {
				continue
			}
			// A pod in several of the keys is returned once.
			if i > 0 && inAnyGroup(c.groups, keys[:i], p) {
				continue
			}
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *model.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

func inAnyGroup(groups map[string]map[string]*model.Pod, keys []string, p *model.Pod) bool {
	name := p.Key()
	for _, k := range keys {
		if _, ok := groups[k][name]; ok {
			return true
		}
	}
	return false
}

// NodeLabels returns the labels of a node, and whether the node is known.
// The map is the node informer's own, shared with its owner: it is not to
// be modified.
func (c *Cache) NodeLabels(name string) (map[string]string, bool) {
	obj, ok, err := c.nodes.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, false
	}
	return n.Labels, true
}

// PodCount is the number of indexed pods (bound pods that belong to a group).
func (c *Cache) PodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byName)
}

// NodeCount is the number of known nodes.
func (c *Cache) NodeCount() int {
	return len(c.nodes.GetIndexer().ListKeys())
}

// PodByUID returns an indexed (bound or assumed) pod.
func (c *Cache) PodByUID(uid types.UID) (*model.Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.byName[c.byUID[uid]]
	if !ok {
		return nil, false
	}
	return e.pod, true
}
