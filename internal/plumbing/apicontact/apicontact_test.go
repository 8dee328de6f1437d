package apicontact

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestReadyUntilContactLostLongerThanThreshold(t *testing.T) {
	down := errors.New("connection refused")
	type step struct {
		ping    error         // what the API server answers
		advance time.Duration // time passed before the ping
		wantErr string        // "" for ready
		gauge   float64
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"answers", []step{{advance: 20 * time.Second, gauge: 1}, {advance: 20 * time.Second, gauge: 1}}},
		{"a short outage is tolerated", []step{
			{ping: down, advance: 10 * time.Second, gauge: 1},
			{ping: down, advance: 10 * time.Second, gauge: 1},
			{advance: 5 * time.Second, gauge: 1},
		}},
		{"lost past the threshold, then back", []step{
			{ping: down, advance: 20 * time.Second, gauge: 1},
			{ping: down, advance: 20 * time.Second, wantErr: "no answer from the API server for 40s (threshold 30s): the placement cache may be stale: connection refused", gauge: 0},
			{advance: time.Second, gauge: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			var answer error
			w, err := New(Config{Ping: func(context.Context) error { return answer }, Threshold: 30 * time.Second,
				Clock: clk, Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				clk.Step(s.advance)
				answer = s.ping
				w.ping(context.Background())
				got := ""
				if err := w.Err(); err != nil {
					got = err.Error()
				}
				if got != s.wantErr {
					t.Errorf("step %d: Err() = %q, want %q", i, got, s.wantErr)
				}
				if g := testutil.ToFloat64(w.reachable); g != s.gauge {
					t.Errorf("step %d: regosched_api_server_reachable = %v, want %v", i, g, s.gauge)
				}
			}
		})
	}
}

// TestNeverAnswered: readiness turns false even when no ping ever returns.
func TestNeverAnswered(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w, err := New(Config{Ping: func(context.Context) error { return nil }, Threshold: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Second)
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "no ping has returned") {
		t.Errorf("Err() = %v, want one saying no ping has returned", err)
	}
}

// Three pings fit in the threshold, however short: a period equal to a 1 s
// threshold let one late tick turn readiness false while the API server
// answered, and gave "no ping has returned" for a server that refused.
func TestPingPeriodIsAThirdOfTheThreshold(t *testing.T) {
	for _, threshold := range []time.Duration{time.Second, 3 * time.Second, 30 * time.Second} {
		t.Run(threshold.String(), func(t *testing.T) {
			w, err := New(Config{Threshold: threshold, Ping: func(context.Context) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			if got := w.period; 3*got > threshold {
				t.Errorf("period = %s for threshold %s, want at most a third", got, threshold)
			}
		})
	}
}
