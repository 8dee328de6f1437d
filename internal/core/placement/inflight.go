package placement

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
)

// In-flight pods close the gap between a decision and the informer.
//
// kube-scheduler assumes a pod on a node and binds it asynchronously, so the
// filter call for the next pod of the same group can arrive before any
// informer has seen the first pod bound. A pod that passed filter is
// therefore in flight, and its peers' filter calls wait for it, bounded,
// before deciding. The life of a pod in this cache, from the filter call that
// lets it through:
//
//	            Reserve (filter kept a node)
//	                      |
//	                      v
//	               +-------------+  ttl passed (WaitForPeers or a Reserve
//	               |  Reserved   |  sweep drops it)
//	               |  in flight  |-------------------------------> Expired
//	               +-------------+
//	                 |    |    |  informer: deleted
//	                 |    |    +---------------------------------> Forgotten
//	  bind verb:     |    |  informer: seen bound
//	  Assume         |    +------------------------+
//	                 v                             v
//	          +-------------+  informer:    +-------------+
//	          |   Assumed   |-------------->|  Confirmed  |
//	          +-------------+  seen bound   |  (indexed)  |
//	                 |                      +-------------+
//	  Unassume (bind failed), or
//	  ExpireAssumed (outcome unknown, ttl passed)
//	                 |
//	                 v
//	             Forgotten
//
// Only Reserved holds peers back. Assume, like the informer seeing the pod
// bound or deleted, ends the flight and wakes the waiters (landedLocked).
// An Assumed pod is indexed as bound until the informer's own report
// replaces it; a Confirmed pod is simply an indexed pod.

// inflight is a pod that passed filter and is not yet seen bound.
type inflight struct {
	pod     *model.Pod
	keys    []string
	by      *model.Origin // the policy that decided it
	expires time.Time
}

// minSweep is the number of in-flight entries below which expired ones are
// left for WaitForPeers or a landing to remove.
const minSweep = 64

// Reserve marks pod (pending, with its groups under the policy by) in
// flight for ttl: peers that ask WaitForPeers in the meantime wait until it
// lands or expires. A pod without groups holds no one back; it is recorded
// for Reserved alone.
func (c *Cache) Reserve(pod *model.Pod, keys []string, ttl time.Duration, by *model.Origin) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.dropInflightLocked(pod.UID)
	f := &inflight{pod: pod, keys: keys, by: by, expires: now.Add(ttl)}
	c.inflight[pod.UID] = f
	for _, k := range keys {
		m := c.inflightByKey[k]
		if m == nil {
			m = map[types.UID]*inflight{}
			c.inflightByKey[k] = m
		}
		m[pod.UID] = f
	}
	// Pods that passed filter but were never bound (another plugin or the
	// scheduler gave up) expire; sweeping when the map has doubled keeps
	// the cost amortised constant per reservation.
	if len(c.inflight) >= c.sweepAt {
		for uid, f := range c.inflight {
			if !now.Before(f.expires) {
				c.dropInflightLocked(uid)
			}
		}
		c.sweepAt = max(minSweep, 2*len(c.inflight))
	}
}

// dropInflightLocked forgets uid's reservation. The caller holds mu.
func (c *Cache) dropInflightLocked(uid types.UID) *inflight {
	f, ok := c.inflight[uid]
	if !ok {
		return nil
	}
	delete(c.inflight, uid)
	for _, k := range f.keys {
		delete(c.inflightByKey[k], uid)
		if len(c.inflightByKey[k]) == 0 {
			delete(c.inflightByKey, k)
		}
	}
	return f
}

// Reserved returns the pod that Reserve recorded under uid, its groups and
// the policy that decided it, if still in flight.
func (c *Cache) Reserved(uid types.UID) (pod *model.Pod, keys []string, by *model.Origin, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	f, ok := c.inflight[uid]
	if !ok {
		return nil, nil, nil, false
	}
	return f.pod, f.keys, f.by, true
}

// Assume records pod (with Node set) as bound before the informer reports
// it, and ends its flight. The informer's own report replaces it later.
// current, when set, is asked under the lock a re-index swaps under: when
// it says no (the policy pod's keys came from is no longer the one the
// index is built for), nothing is recorded and Assume returns false.
func (c *Cache) Assume(pod *model.Pod, keys []string, current func() bool) bool {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if current != nil && !current() {
		return false
	}
	name := pod.Key()
	c.markDirtyLocked(name)
	a := &assumption{origin: pod, older: c.otherIncarnationsLocked(name, pod.UID)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(name)
	c.add(name, pod, keys, a)
	c.landedLocked(pod.UID)
	return true
}

// otherIncarnationsLocked returns the UIDs other than uid that the index
// (bound or assumed) and the informer's store hold under name: as the bind
// verb binds uid, they are older. The caller holds writeMu.
func (c *Cache) otherIncarnationsLocked(name string, uid types.UID) []types.UID {
	var out []types.UID
	note := func(other types.UID) {
		if other != uid && !slices.Contains(out, other) {
			out = append(out, other)
		}
	}
	if e, ok := c.byName[name]; ok {
		note(e.pod.UID)
	}
	if a := c.assumed[name]; a != nil {
		for _, other := range a.older {
			note(other)
		}
	}
	if r, ok := c.storedRecord(name); ok {
		note(r.uid)
	}
	return out
}

// Unassume takes back an Assume whose binding failed: pod (the very pointer
// given to Assume) leaves the index, unless the informer has replaced it in
// the meantime, in which case the informer's word stands.
func (c *Cache) Unassume(pod *model.Pod) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	name := pod.Key()
	c.markDirtyLocked(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.assumed[name]; a != nil && a.origin == pod {
		c.remove(name)
	}
}

// DefaultInFlightTTL is how long an assumed pod whose binding is not seen
// yet is kept by default (serve's --inflight-ttl, the plugin's PostBind):
// about what a binding takes to reach the informer.
const DefaultInFlightTTL = 2 * time.Second

// ExpireAssumed takes back pod (the very pointer given to Assume) after
// ttl, unless the informer has replaced it by then: for a binding whose
// outcome is unknown, kept meanwhile because it may have gone through.
func (c *Cache) ExpireAssumed(pod *model.Pod, ttl time.Duration) {
	timer := c.clock.NewTimer(ttl)
	go func() {
		<-timer.C()
		c.Unassume(pod)
	}()
}

// WaitForPeers blocks until no pod other than self that shares one of keys
// is in flight, or ctx ends. It returns how long it waited and the pods
// still in flight when it gave up (none on success). It looks only at the
// reservations of keys: its cost does not grow with unrelated pods.
func (c *Cache) WaitForPeers(ctx context.Context, keys []string, self types.UID) (time.Duration, []*model.Pod) {
	start := c.clock.Now()
	for {
		c.mu.Lock()
		now := c.clock.Now()
		var blocking []*model.Pod
		var next time.Time
		seen := map[types.UID]bool{}
		for _, k := range keys {
			for uid, f := range c.inflightByKey[k] {
				if !now.Before(f.expires) {
					// Expired: the scheduler gave up on it or bound it
					// elsewhere unseen; it no longer holds anyone back.
					c.dropInflightLocked(uid)
					continue
				}
				if uid == self || seen[uid] {
					continue
				}
				seen[uid] = true
				blocking = append(blocking, f.pod)
				if next.IsZero() || f.expires.Before(next) {
					next = f.expires
				}
			}
		}
		changed := c.landed
		c.mu.Unlock()
		if len(blocking) == 0 {
			return c.clock.Since(start), nil
		}
		timer := c.clock.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return c.clock.Since(start), blocking
		case <-changed:
		case <-timer.C():
		}
		timer.Stop()
	}
}

// landedLocked ends the flight of uid and, if it held peers back, wakes the
// waiters. The caller holds mu.
func (c *Cache) landedLocked(uid types.UID) {
	if f := c.dropInflightLocked(uid); f != nil && len(f.keys) > 0 {
		close(c.landed)
		c.landed = make(chan struct{})
	}
}

// InFlight is the number of pods in flight, for metrics and tests.
func (c *Cache) InFlight() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.inflight)
}
