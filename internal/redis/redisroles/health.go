package redisroles

import (
	"sync"
	"time"
)

// maxBackoff caps the wait between probes of a pod that keeps failing: a
// Redis back from an outage is relabelled within it.
const maxBackoff = time.Minute

// health is what the controller knows of each pod's last probes: pods that
// answered are checked in a lane of their own, so that pods that fail,
// slowly, or have not answered yet never queue ahead of them; pods that keep
// failing are checked less and less often.
type health struct {
	interval time.Duration

	mu   sync.Mutex
	pods map[string]podHealth // by pod key
}

type podHealth struct {
	trusted  bool // answered its last probe, or needs none: the fast lane
	failures int  // consecutive failed probes
	due      time.Time
}

func newHealth(interval time.Duration) *health {
	return &health{interval: interval, pods: map[string]podHealth{}}
}

// fast reports whether key goes to the lane of pods that answer.
func (h *health) fast(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pods[key].trusted
}

// due reports whether a periodic check of key is due at now.
func (h *health) isDue(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !now.Before(h.pods[key].due)
}

// answered records a successful probe, or a check that needs none.
func (h *health) answered(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods[key] = podHealth{trusted: true}
}

// failed records a failed probe at now and returns how long the pod is
// left alone: the interval, doubled at each further failure up to
// maxBackoff.
func (h *health) failed(key string, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pods[key]
	p.trusted = false
	p.failures++
	wait := h.interval
	for i := 1; i < p.failures && wait < maxBackoff; i++ {
		wait *= 2
	}
	wait = min(max(wait, h.interval), max(maxBackoff, h.interval))
	p.due = now.Add(wait)
	h.pods[key] = p
	return wait
}

// known reports whether key was checked since it last changed.
func (h *health) known(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.pods[key]
	return ok
}

// forget drops what is known of key: a changed or deleted pod starts over.
func (h *health) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pods, key)
}
