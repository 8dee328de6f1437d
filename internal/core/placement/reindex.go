package placement

import (
	"context"
	"fmt"
	"maps"

	"github.com/regosched/regosched/internal/core/model"
)

// SetKeyFunc re-indexes every cached pod under keys (a new policy's
// grouping) and then makes keys the cache's grouping. The new index is
// built beside the one in use, which keeps serving peers and taking
// informer events and binds meanwhile; pods written during the build are
// described again at the end, and the new index, keys and whatever activate
// does (storing the new policy) take effect together, under the locks that
// readers and writers take. Writers wait only for that end, never for the
// whole build. It returns an error, and changes nothing, when ctx ends
// first.
func (c *Cache) SetKeyFunc(ctx context.Context, keys KeyFunc, activate func()) error {
	c.reindexMu.Lock()
	defer c.reindexMu.Unlock()

	c.writeMu.Lock()
	c.dirty = map[string]struct{}{}
	assumed := c.assumedLocked()
	c.writeMu.Unlock()
	stopTracking := func() {
		c.writeMu.Lock()
		c.dirty = nil
		c.writeMu.Unlock()
	}

	next := newIndex()
	for _, obj := range c.pods.GetStore().List() {
		if ctx.Err() != nil {
			stopTracking()
			return fmt.Errorf("re-indexing pods: %w", ctx.Err())
		}
		if r, ok := recordOf(obj); ok && assumed[model.PodKey(r.namespace, r.name)] == nil {
			c.addRecord(ctx, &next, keys, r)
		}
	}
	for name, a := range assumed {
		c.describeName(ctx, &next, keys, name, a)
	}

	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	for name := range c.dirty {
		next.remove(name)
		c.describeName(ctx, &next, keys, name, c.assumed[name])
	}
	c.dirty = nil
	c.keyFunc.Store(&keys)
	c.mu.Lock()
	c.index = next
	if activate != nil {
		activate()
	}
	c.mu.Unlock()
	return nil
}

// describeName adds to ix what the index is to hold under name: the
// assumed pod a (nil when none), unless the informer's record supersedes
// it, else that record. The caller holds writeMu, or a is from a snapshot
// taken under it (a name written since is described again).
func (c *Cache) describeName(ctx context.Context, ix *index, keys KeyFunc, name string, a *assumption) {
	r, _ := c.storedRecord(name)
	if a != nil && (r == nil || !c.supersedes(a, r)) {
		c.describeAssumed(ctx, ix, keys, name, a)
		return
	}
	if r != nil {
		c.addRecord(ctx, ix, keys, r)
	}
}

// addRecord adds the pod of an informer record to ix as keys groups it.
func (c *Cache) addRecord(ctx context.Context, ix *index, keys KeyFunc, r *podRecord) {
	pod, groups := c.describeRecord(ctx, keys, r)
	ix.add(pod.Key(), pod, groups, nil)
}

// assumedLocked returns the pods the bind verb recorded and the informer
// has not reported yet. The caller holds writeMu.
func (c *Cache) assumedLocked() map[string]*assumption {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.assumed)
}

// describeAssumed adds an assumed pod to ix as keys groups it. The pod is
// copied (published Pod values are never modified); Unassume still names it
// by a.origin, the pod given to Assume.
func (c *Cache) describeAssumed(ctx context.Context, ix *index, keys KeyFunc, name string, a *assumption) {
	pod := *a.origin
	groups, described, err := keys(ctx, &pod)
	if err != nil {
		c.log.WithError(err).WithField("pod", name).Error("computing peer keys of an assumed pod; pod not indexed")
		return
	}
	pod.Claims = described
	ix.add(name, &pod, groups, a)
}

// markDirtyLocked notes that name was written while a re-index builds its
// index. The caller holds writeMu.
func (c *Cache) markDirtyLocked(name string) {
	if c.dirty != nil {
		c.dirty[name] = struct{}{}
	}
}
