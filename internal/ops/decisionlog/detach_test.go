package decisionlog

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEnqueueCopies: the caller may reuse its slices and maps once Enqueue
// returns (the extender recycles a request's candidate list), and the
// event logged is the one enqueued.
func TestEnqueueCopies(t *testing.T) {
	var buf bytes.Buffer
	l := newLogger(t, testConfig(t, NewWriterSink(&buf)))
	labels := map[string]string{"app": "redis"}
	nodes := []string{"n1", "n2"}
	denied := []Denial{{Node: "n2", Rule: "r", Peer: "db/p"}}
	scores := map[string]int64{"n1": 3}
	victims := []Victim{{Node: "n1", Pods: []string{"db/low"}}}
	l.Enqueue(Event{DecisionID: "d", Timestamp: testTime, Verb: VerbFilter, Pod: Pod{Namespace: "db", Name: "p", Labels: labels},
		Nodes: nodes, Denied: denied, Scores: scores, Victims: victims, Outcome: OutcomeFeasible})
	labels["app"], nodes[0], denied[0].Rule, scores["n1"], victims[0].Pods[0] = "x", "x", "x", 9, "x"
	scores["n9"] = 1
	closeLogger(t, l)
	got := decodeLines(t, buf.Bytes())
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	want := map[string]any{
		"input": map[string]any{"pod": map[string]any{"namespace": "db", "name": "p", "labels": map[string]any{"app": "redis"}},
			"nodes": []any{"n1", "n2"}, "node_count": float64(2)},
		"result": map[string]any{"outcome": OutcomeFeasible,
			"denied":  []any{map[string]any{"node": "n2", "rule": "r", "peer": "db/p"}},
			"scores":  map[string]any{"n1": float64(3)},
			"victims": []any{map[string]any{"node": "n1", "pods": []any{"db/low"}}}},
	}
	if diff := cmp.Diff(want, map[string]any{"input": got[0]["input"], "result": got[0]["result"]}); diff != "" {
		t.Errorf("event after the caller changed its copies (-want +got):\n%s", diff)
	}
}

// TestEnqueueBoundsLists: every list is cut to MaxListed, the cut named in
// truncated, and node_count keeps the number of candidates.
func TestEnqueueBoundsLists(t *testing.T) {
	const n = 5000
	nodes := make([]string, n)
	denied := make([]Denial, n)
	scores := make(map[string]int64, n)
	victims := make([]Victim, n)
	for i := range n {
		nodes[i] = fmt.Sprintf("node-%d", i)
		denied[i] = Denial{Node: nodes[i], Rule: "r"}
		scores[nodes[i]] = 1
		victims[i] = Victim{Node: nodes[i]}
	}
	tests := []struct {
		name          string
		ev            Event
		wantNodeCount float64
		wantTruncated []any
		list          func(m map[string]any) int
		wantListed    int
	}{
		{"nodes", Event{Nodes: nodes}, n, []any{TruncatedNodes},
			func(m map[string]any) int { return len(m["input"].(map[string]any)["nodes"].([]any)) }, MaxListed},
		{"nodes counted by the caller", Event{Nodes: nodes[:3], NodeCount: n, Truncated: []string{TruncatedNodes}}, n, []any{TruncatedNodes},
			func(m map[string]any) int { return len(m["input"].(map[string]any)["nodes"].([]any)) }, 3},
		{"denied", Event{Denied: denied}, 0, []any{TruncatedDenied},
			func(m map[string]any) int { return len(m["result"].(map[string]any)["denied"].([]any)) }, MaxListed},
		{"scores", Event{Scores: scores}, 0, []any{TruncatedScores},
			func(m map[string]any) int { return len(m["result"].(map[string]any)["scores"].(map[string]any)) }, MaxListed},
		{"victims", Event{Victims: victims}, 0, []any{TruncatedVictims},
			func(m map[string]any) int { return len(m["result"].(map[string]any)["victims"].([]any)) }, MaxListed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := newLogger(t, testConfig(t, NewWriterSink(&buf)))
			tt.ev.Verb = VerbFilter
			if !l.Enqueue(tt.ev) {
				t.Fatal("Enqueue dropped the event")
			}
			closeLogger(t, l)
			got := decodeLines(t, buf.Bytes())
			if len(got) != 1 {
				t.Fatalf("got %d events, want 1", len(got))
			}
			count, _ := got[0]["input"].(map[string]any)["node_count"].(float64)
			gotView := []any{count, got[0]["truncated"], tt.list(got[0])}
			if diff := cmp.Diff([]any{tt.wantNodeCount, tt.wantTruncated, tt.wantListed}, gotView); diff != "" {
				t.Errorf("node_count, truncated, listed (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkEnqueueLarge: a 5,000-candidate event costs Enqueue what a
// MaxListed one does.
func BenchmarkEnqueueLarge(b *testing.B) {
	nodes := make([]string, 5000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i)
	}
	cfg := testConfig(b, &captureSink{})
	cfg.Registerer = nil
	cfg.MaxEvents, cfg.FlushBytes = 1, 1<<30
	l := newLogger(b, cfg)
	defer closeLogger(b, l)
	ev := Event{Verb: VerbFilter, Pod: Pod{Namespace: "db", Name: "redis-0"}, Nodes: nodes}
	b.ReportAllocs()
	for b.Loop() {
		l.Enqueue(ev)
	}
}
