package benche2e

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		name        string
		done, total int
		took        time.Duration
		want        string
	}{
		{"midway", 250, 1000, 10 * time.Second, "scheduling: 250/1000 (25%), 25.0/s over 10s"},
		{"no total", 3, 0, 2 * time.Second, "scheduling: 3/0, 1.5/s over 2s"},
		{"no time yet", 0, 10, 0, "scheduling: 0/10 (0%)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, progressLine("scheduling", tc.done, tc.total, tc.took)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The reporter reports while the phase runs and nothing after stop.
func TestProgressReportsUntilStopped(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	var n atomic.Int64
	stop := progress(log, time.Millisecond, "creating pods", 100, func() int { return int(n.Add(1)) })
	deadline := time.Now().Add(10 * time.Second)
	for len(hook.AllEntries()) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no reports within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	after := len(hook.AllEntries())
	time.Sleep(20 * time.Millisecond)
	if got := len(hook.AllEntries()); got != after {
		t.Errorf("%d reports after stop", got-after)
	}
	e := hook.AllEntries()[0]
	if e.Level != logrus.InfoLevel || !strings.HasPrefix(e.Message, "creating pods: ") {
		t.Errorf("report %q at %s", e.Message, e.Level)
	}
}
