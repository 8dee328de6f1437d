package decision

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// scoreCache hands the penalties that filter computed (in the same Rego pass
// as the conflicts) to the prioritize call that follows it for the same pod,
// a few milliseconds later, so that prioritize needs no policy evaluation.
// An entry is used once, and only under the policy that made it.
type scoreCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	now     func() time.Time
	entries map[types.UID]scoreEntry
}

type scoreEntry struct {
	policy    *policy.Policy
	penalties []model.Penalty
	expires   time.Time
}

// sweepAbove bounds the map: past this size, expired entries are dropped on
// insert (pods filtered but never prioritized, e.g. a single feasible node).
const sweepAbove = 256

func newScoreCache(ttl time.Duration) *scoreCache {
	return &scoreCache{ttl: ttl, now: time.Now, entries: map[types.UID]scoreEntry{}}
}

func (c *scoreCache) put(uid types.UID, pol *policy.Policy, penalties []model.Penalty) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) > sweepAbove {
		for k, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, k)
			}
		}
	}
	c.entries[uid] = scoreEntry{policy: pol, penalties: penalties, expires: now.Add(c.ttl)}
}

// take returns and forgets the penalties stored for uid under pol.
func (c *scoreCache) take(uid types.UID, pol *policy.Policy) ([]model.Penalty, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[uid]
	if !ok {
		return nil, false
	}
	delete(c.entries, uid)
	if e.policy != pol || c.now().After(e.expires) {
		return nil, false
	}
	return e.penalties, true
}
