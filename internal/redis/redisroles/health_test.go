package redisroles

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHealthBackoff(t *testing.T) {
	const interval = 10 * time.Second
	h := newHealth(interval)
	now := time.Unix(0, 0)
	var waits []time.Duration
	for range 8 {
		waits = append(waits, h.failed("shop/x", now))
	}
	want := []time.Duration{interval, 2 * interval, 4 * interval, maxBackoff, maxBackoff, maxBackoff, maxBackoff, maxBackoff}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits after consecutive failures (-want +got):\n%s", diff)
	}
	tests := []struct {
		name string
		at   time.Duration
		key  string
		due  bool
		fast bool
	}{
		{"failing, before its time", maxBackoff - time.Second, "shop/x", false, false},
		{"failing, at its time", maxBackoff, "shop/x", true, false},
		{"never seen", 0, "shop/new", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.isDue(tt.key, now.Add(tt.at)); got != tt.due {
				t.Errorf("isDue() = %v, want %v", got, tt.due)
			}
			if got := h.fast(tt.key); got != tt.fast {
				t.Errorf("fast() = %v, want %v", got, tt.fast)
			}
		})
	}
	h.answered("shop/x")
	if !h.fast("shop/x") || !h.isDue("shop/x", now) {
		t.Error("an answer does not reset the backoff")
	}
	if h.failed("shop/x", now) != interval {
		t.Error("the first failure after an answer waits more than one interval")
	}
}
