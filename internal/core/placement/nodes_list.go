package placement

import "slices"

// NodeNames returns the names of every known node, sorted. It lists the
// whole node informer, so it is meant for tools (regosched explain), not
// for the request path.
func (c *Cache) NodeNames() []string {
	names := c.nodes.GetIndexer().ListKeys()
	slices.Sort(names)
	return names
}
