package audit

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestProgressString(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Progress
		want string
	}{
		{name: "listing", p: Progress{Pods: 12000, Nodes: 5000}, want: "listing: 12000 pods, 5000 nodes so far"},
		{name: "listed", p: Progress{Listed: true, Pods: 12000, Nodes: 5000}, want: "listed 12000 pods, 5000 nodes"},
		{name: "judging", p: Progress{Listed: true, Pods: 12000, Nodes: 5000, Judged: 300, ToJudge: 1200},
			want: "listed 12000 pods, 5000 nodes; judged 300/1200 pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.p.String()); diff != "" {
				t.Errorf("String() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProgressPrinter: one line per interval at most, none before the
// first interval, and the final counts once lines were shown.
func TestProgressPrinter(t *testing.T) {
	listing := func(pods int) Progress { return Progress{Pods: pods, Nodes: 2} }
	judging := func(done int) Progress { return Progress{Listed: true, Pods: 9, Nodes: 2, Judged: done, ToJudge: 4} }
	// step is an update after the clock moved by wait; done calls Done.
	type step struct {
		wait time.Duration
		p    Progress
		done bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  string
	}{
		{
			name:  "shorter than an interval: quiet",
			steps: []step{{0, listing(1), false}, {500 * time.Millisecond, judging(4), false}, {done: true}},
			want:  "",
		},
		{
			name: "one line per interval",
			steps: []step{
				{0, listing(1), false},
				{time.Second, listing(5), false}, // the first interval is over
				{300 * time.Millisecond, listing(7), false},
				{300 * time.Millisecond, judging(1), false},
				{400 * time.Millisecond, judging(2), false}, // an interval since the last line
				{100 * time.Millisecond, judging(4), false},
				{done: true}, // the final counts
			},
			want: "audit: listing: 5 pods, 2 nodes so far\n" +
				"audit: listed 9 pods, 2 nodes; judged 2/4 pods\n" +
				"audit: listed 9 pods, 2 nodes; judged 4/4 pods\n",
		},
		{
			name:  "the final line is not repeated",
			steps: []step{{time.Second, judging(4), false}, {done: true}},
			want:  "audit: listed 9 pods, 2 nodes; judged 4/4 pods\n",
		},
		{
			name:  "a quiet spell prints the latest at the next update",
			steps: []step{{time.Second, listing(1), false}, {5 * time.Second, listing(3), false}},
			want:  "audit: listing: 1 pods, 2 nodes so far\naudit: listing: 3 pods, 2 nodes so far\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var out bytes.Buffer
			pp := NewProgressPrinter(&out, "audit: ", clock, time.Second)
			for _, s := range tc.steps {
				clock.SetTime(clock.Now().Add(s.wait))
				if s.done {
					pp.Done()
					continue
				}
				pp.Update(s.p)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("printed (-want +got):\n%s", diff)
			}
		})
	}
}
