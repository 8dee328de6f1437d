// Package timebox bounds a call in a test that must answer fast, so that a
// call blocked for good (an open of a FIFO, a read of a device) fails the
// test instead of hanging it until the go test timeout.
package timebox

import (
	"testing"
	"time"
)

// Call runs f and fails t when it has not returned within d; a call blocked
// for good is left behind, as the test ends anyway. Call it from the test's
// goroutine.
func Call[T any](t testing.TB, d time.Duration, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(d):
		t.Fatalf("no answer within %s", d)
		var zero T
		return zero, nil
	}
}
