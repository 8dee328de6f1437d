package placement

import (
	"context"
	"slices"

	"k8s.io/client-go/tools/cache"

	"github.com/regosched/regosched/internal/core/model"
)

// writer routes the pod informer's events to the index.
func (c *Cache) writer() recordWriter {
	return recordWriter{mu: &c.writeMu, upsert: c.upsertLocked, remove: c.removeLocked}
}

// selectingWriter is writer for a pod informer of full pods that lists
// more pods than boundPods selects. Adds and updates pass as a watch with
// that selector would see them: of the pods it selects only, a pod that
// becomes bound being added and one that finishes deleted. Every delete
// passes: a pod deleted before it was seen bound ends its flight (and
// leaves the index if the bind verb assumed it), which New's informers do
// not see; the index holds no other unbound pod.
func (c *Cache) selectingWriter() cache.ResourceEventHandler {
	return everyDelete{cache.FilteringResourceEventHandler{FilterFunc: occupiesNode, Handler: c.writer().handlers()}}
}

// everyDelete is a FilteringResourceEventHandler whose filter applies to
// adds and updates only.
type everyDelete struct {
	cache.FilteringResourceEventHandler
}

func (h everyDelete) OnDelete(obj any) { h.Handler.OnDelete(obj) }

// removeLocked drops p from the index. The caller holds writeMu.
func (c *Cache) removeLocked(p *podRecord) {
	c.markDirtyLocked(model.PodKey(p.namespace, p.name))
	c.mu.Lock()
	defer c.mu.Unlock()
	// A late delete of an earlier incarnation (same name, another UID) must
	// not take out the one indexed now, e.g. assumed by the bind verb.
	name := model.PodKey(p.namespace, p.name)
	if e, ok := c.byName[name]; ok && e.pod.UID == p.uid {
		c.remove(name)
	}
	// A pod deleted in flight will never land: stop waiting for it.
	c.landedLocked(p.uid)
}

// upsertLocked (re)indexes p. The caller holds writeMu.
func (c *Cache) upsertLocked(ctx context.Context, obj *podRecord) {
	name := model.PodKey(obj.namespace, obj.name)
	c.markDirtyLocked(name)
	if obj.nodeName == "" {
		// Not bound: nothing this index holds, whatever the field selector
		// let through; an unbound view of an assumed pod must not take it out.
		return
	}
	if a := c.assumed[name]; a != nil && !c.supersedes(a, obj) {
		return // a late event of an older incarnation: the assumed pod stands
	}
	pod, keys := c.describeRecord(ctx, *c.keyFunc.Load(), obj)
	c.mu.Lock()
	old := c.byName[name]
	c.remove(name)
	// Seen bound: whatever was in flight has landed.
	c.landedLocked(pod.UID)
	c.add(name, pod, keys, nil)
	c.mu.Unlock()
	if c.onRelabel != nil && old != nil && old.pod.UID == pod.UID && old.pod.Labels != pod.Labels &&
		(!slices.Equal(old.keys, keys) || !old.pod.Claims.Same(pod.Claims)) {
		c.onRelabel()
	}
}

// describeRecord is the pod of a record with its groups and claims under
// keys; a pod that is not bound, or that the policy cannot describe, has no
// group.
func (c *Cache) describeRecord(ctx context.Context, keys KeyFunc, obj *podRecord) (*model.Pod, []string) {
	pod := obj.pod()
	if obj.nodeName == "" || obj.terminal {
		return pod, nil
	}
	// pod is not shared yet: setting Claims keeps Pod values immutable once
	// published.
	groups, described, err := keys(ctx, pod)
	if err != nil {
		// The pod is kept out of the index: the policy cannot say which
		// rules concern it. Logged loudly because it weakens decisions.
		c.log.WithError(err).WithField("pod", pod.Key()).Error("computing peer keys; pod not indexed")
		return pod, nil
	}
	pod.Claims = described
	return pod, groups
}

// supersedes reports whether the informer's record r of an assumed pod's
// name replaces the pod the bind verb recorded: r is that pod seen bound
// (or finished), or a newer incarnation. An unbound view does not, nor does
// a late event of an incarnation the cache held when the pod was assumed,
// or of one the informer's store no longer holds (the events that
// followed are on their way).
func (c *Cache) supersedes(a *assumption, r *podRecord) bool {
	switch {
	case r.nodeName == "":
		return false
	case r.uid == a.origin.UID:
		return true
	case slices.Contains(a.older, r.uid):
		return false
	}
	cur, ok := c.storedRecord(model.PodKey(r.namespace, r.name))
	return ok && cur.uid == r.uid
}

// storedRecord is the record of what the pod informer's store holds under
// name.
func (c *Cache) storedRecord(name string) (*podRecord, bool) {
	obj, ok, err := c.pods.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return recordOf(obj)
}
