package decisionlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/regosched/regosched/internal/ops/decisionlog/decisionlogtest"
)

var testTime = time.Date(2026, 12, 7, 5, 0, 0, 123, time.UTC)

func testConfig(t testing.TB, sink Sink) Config {
	t.Helper()
	log, _ := logtest.NewNullLogger()
	return Config{
		Sink:          sink,
		SampleRate:    1,
		Seed:          1,
		InstanceID:    "regosched-0",
		Version:       "v0.0.0-test",
		FlushInterval: time.Hour, // tests flush by Close
		Log:           log,
		Registerer:    prometheus.NewRegistry(),
	}
}

func newLogger(t testing.TB, cfg Config) *Logger {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

func closeLogger(t testing.TB, l *Logger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// decodeLines decodes one JSON object per line as generic values, so that
// the test sees field names exactly as a collector would.
func decodeLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestEventJSON(t *testing.T) {
	pod := Pod{Namespace: "db", Name: "redis-0", UID: "u-1", Labels: map[string]string{"app": "redis"}}
	bundles := map[string]string{"regosched": "rev-7"}
	wantPod := map[string]any{"namespace": "db", "name": "redis-0", "uid": "u-1", "labels": map[string]any{"app": "redis"}}
	base := func(path string, result map[string]any) map[string]any {
		return map[string]any{
			"labels":      map[string]any{"id": "regosched-0", "version": "v0.0.0-test"},
			"decision_id": "d-1",
			"bundles":     map[string]any{"regosched": map[string]any{"revision": "rev-7"}},
			"path":        path,
			"input":       map[string]any{"pod": wantPod, "nodes": []any{"n1", "n2"}, "node_count": float64(2)},
			"result":      result,
			"timestamp":   "2026-12-07T05:00:00.000000123Z",
			"metrics":     map[string]any{MetricDecisionNS: float64(1500)},
		}
	}
	tests := []struct {
		name string
		ev   Event
		want map[string]any
	}{
		{
			name: "filter",
			ev: Event{Verb: VerbFilter, Outcome: "filtered",
				Denied: []Denial{{Node: "n2", Rule: "masters_apart", Peer: "db/redis-1"}}},
			want: base("regosched/filter", map[string]any{"outcome": "filtered",
				"denied": []any{map[string]any{"node": "n2", "rule": "masters_apart", "peer": "db/redis-1"}}}),
		},
		{
			name: "prioritize",
			ev:   Event{Verb: VerbPrioritize, Outcome: "scored", Scores: map[string]int64{"n1": 10, "n2": 0}},
			want: base("regosched/prioritize", map[string]any{"outcome": "scored",
				"scores": map[string]any{"n1": float64(10), "n2": float64(0)}}),
		},
		{
			name: "preempt",
			ev: Event{Verb: VerbPreempt, Outcome: "victims",
				Victims: []Victim{{Node: "n1", Pods: []string{"db/low-0"}}}},
			want: base("regosched/preempt", map[string]any{"outcome": "victims",
				"victims": []any{map[string]any{"node": "n1", "pods": []any{"db/low-0"}}}}),
		},
		{
			name: "bind error",
			ev:   Event{Verb: VerbBind, Outcome: "error", Node: "n1", Error: "conflict"},
			want: base("regosched/bind", map[string]any{"outcome": "error", "node": "n1", "error": "conflict"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := newLogger(t, testConfig(t, NewWriterSink(&buf)))
			tt.ev.DecisionID = "d-1"
			tt.ev.Timestamp = testTime
			tt.ev.Pod = pod
			tt.ev.Nodes = []string{"n1", "n2"}
			tt.ev.Bundles = bundles
			tt.ev.Duration = 1500 * time.Nanosecond
			if !l.Enqueue(tt.ev) {
				t.Fatal("Enqueue dropped the event")
			}
			closeLogger(t, l)
			got := decodeLines(t, buf.Bytes())
			if diff := cmp.Diff([]map[string]any{tt.want}, got); diff != "" {
				t.Errorf("event JSON (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOPAEventV1Decodes checks the schema against OPA's own type: what OPA's
// decision log plugin would have sent decodes into the same fields.
func TestOPAEventV1Decodes(t *testing.T) {
	var buf bytes.Buffer
	l := newLogger(t, testConfig(t, NewWriterSink(&buf)))
	l.Enqueue(Event{DecisionID: "d-9", Timestamp: testTime, Verb: VerbFilter, Outcome: "filtered",
		Pod: Pod{Namespace: "db", Name: "p"}, Bundles: map[string]string{"b": "r1"}, Duration: time.Millisecond})
	closeLogger(t, l)
	var ev logs.EventV1
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &ev); err != nil {
		t.Fatalf("decode into logs.EventV1: %v", err)
	}
	type view struct {
		ID, Path string
		Bundles  map[string]logs.BundleInfoV1
		Labels   map[string]string
		Time     time.Time
		Metric   any
		HasInput bool
		HasRes   bool
	}
	got := view{ev.DecisionID, ev.Path, ev.Bundles, ev.Labels, ev.Timestamp, ev.Metrics[MetricDecisionNS],
		ev.Input != nil, ev.Result != nil}
	want := view{"d-9", "regosched/filter", map[string]logs.BundleInfoV1{"b": {Revision: "r1"}},
		map[string]string{"id": "regosched-0", "version": "v0.0.0-test"}, testTime, float64(1e6), true, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EventV1 (-want +got):\n%s", diff)
	}
}

func TestMasking(t *testing.T) {
	labels := map[string]string{"app": "redis", "secret/token": "s3cr3t", "owner": "alice"}
	tests := []struct {
		name       string
		keys       []string
		mode       MaskMode
		wantLabels map[string]any
		wantErased []any
		wantMasked []any
	}{
		{
			name:       "none configured",
			wantLabels: map[string]any{"app": "redis", "secret/token": "s3cr3t", "owner": "alice"},
		},
		{
			name:       "drop is the default",
			keys:       []string{"secret/token", "owner", "absent"},
			wantLabels: map[string]any{"app": "redis"},
			wantErased: []any{"/input/pod/labels/owner", "/input/pod/labels/secret~1token"},
		},
		{
			name:       "replace",
			keys:       []string{"secret/token"},
			mode:       MaskReplace,
			wantLabels: map[string]any{"app": "redis", "secret/token": DefaultMaskValue, "owner": "alice"},
			wantMasked: []any{"/input/pod/labels/secret~1token"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			cfg := testConfig(t, NewWriterSink(&buf))
			cfg.MaskLabels, cfg.MaskMode = tt.keys, tt.mode
			l := newLogger(t, cfg)
			l.Enqueue(Event{Verb: VerbFilter, Pod: Pod{Namespace: "db", Name: "p", Labels: labels}})
			closeLogger(t, l)
			got := decodeLines(t, buf.Bytes())
			if len(got) != 1 {
				t.Fatalf("got %d events, want 1", len(got))
			}
			type view struct {
				Labels         any
				Erased, Masked any
			}
			w := view{Labels: tt.wantLabels}
			if tt.wantErased != nil {
				w.Erased = tt.wantErased
			}
			if tt.wantMasked != nil {
				w.Masked = tt.wantMasked
			}
			g := view{got[0]["input"].(map[string]any)["pod"].(map[string]any)["labels"], got[0]["erased"], got[0]["masked"]}
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("masking (-want +got):\n%s", diff)
			}
			if labels["secret/token"] != "s3cr3t" || len(labels) != 3 {
				t.Errorf("masking changed the caller's labels: %v", labels)
			}
		})
	}
}

// captureSink keeps what it is given, for tests that need no encoding detail.
type captureSink struct {
	mu     sync.Mutex
	events [][]byte
}

func (s *captureSink) Write(_ context.Context, batch [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, batch...)
	return nil
}
func (s *captureSink) Close() error { return nil }

func TestSampling(t *testing.T) {
	const n = 10000
	tests := []struct {
		name     string
		rate     float64
		min, max int
	}{
		{"never", 0, 0, 0},
		{"always", 1, n, n},
		{"tenth", 0.1, n / 10 * 9 / 10, n / 10 * 11 / 10},
		{"half", 0.5, n / 2 * 9 / 10, n / 2 * 11 / 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(seed uint64) []bool {
				cfg := testConfig(t, &captureSink{})
				cfg.SampleRate, cfg.Seed, cfg.MaxEvents = tt.rate, seed, n
				l := newLogger(t, cfg)
				defer closeLogger(t, l)
				kept := make([]bool, n)
				for i := range kept {
					kept[i] = l.Enqueue(Event{Verb: VerbFilter})
				}
				return kept
			}
			a, b := run(42), run(42)
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("same seed, different samples (-first +second):\n%s", diff)
			}
			count := 0
			for _, k := range a {
				if k {
					count++
				}
			}
			if count < tt.min || count > tt.max {
				t.Errorf("kept %d of %d at rate %v, want %d..%d", count, n, tt.rate, tt.min, tt.max)
			}
		})
	}
}

func TestHTTPSink(t *testing.T) {
	tests := []struct {
		name         string
		events       int
		limit        int
		fail         int32
		wantRequests func(int) bool
	}{
		{"one batch", 5, 0, 0, func(n int) bool { return n == 1 }},
		{"split by upload limit", 50, 2048, 0, func(n int) bool { return n > 1 }},
		{"retried after failures", 3, 0, 2, func(n int) bool { return n == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv, url := decisionlogtest.Start(t)
			rcv.Fail.Store(tt.fail)
			tok := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tok, []byte("tok-1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			sink, err := NewHTTPSink(HTTPConfig{URL: url + "/", UploadSizeLimitBytes: tt.limit,
				MinRetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond, BearerTokenFile: tok})
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(t, sink)
			l := newLogger(t, cfg)
			var want []string
			for i := range tt.events {
				id := fmt.Sprintf("d-%d", i)
				want = append(want, id)
				l.Enqueue(Event{DecisionID: id, Verb: VerbFilter, Pod: Pod{Namespace: "db", Name: id}})
			}
			closeLogger(t, l)
			if p := rcv.Problems(); len(p) > 0 {
				t.Errorf("the receiver refused uploads: %q", p)
			}
			var got []string
			for _, e := range decisionlogtest.Events[struct {
				DecisionID string `json:"decision_id"`
			}](t, rcv) {
				got = append(got, e.DecisionID)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("received decision IDs (-want +got):\n%s", diff)
			}
			if n := rcv.Uploads(); !tt.wantRequests(n) {
				t.Errorf("%d uploads", n)
			}
			if n := rcv.MaxUpload(); tt.limit > 0 && n > tt.limit {
				t.Errorf("an upload had %d bytes, limit %d", n, tt.limit)
			}
			for _, a := range rcv.Auth() {
				if a != "Bearer tok-1" {
					t.Errorf("Authorization %q, want Bearer tok-1", a)
				}
			}
			for _, r := range []string{ReasonUploadFailed, ReasonTooLarge} {
				if n := testutil.ToFloat64(l.Dropped().WithLabelValues(r)); n != 0 {
					t.Errorf("dropped{%s} = %v, want 0", r, n)
				}
			}
		})
	}
}

func TestHTTPSinkDrops(t *testing.T) {
	tests := []struct {
		name   string
		fail   int32
		big    bool
		reason string
	}{
		{"receiver keeps failing", 1 << 20, false, ReasonUploadFailed},
		{"event over the upload limit", 0, true, ReasonTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv, url := decisionlogtest.Start(t)
			rcv.Fail.Store(tt.fail)
			sink, err := NewHTTPSink(HTTPConfig{URL: url, UploadSizeLimitBytes: 1024, MaxRetries: 2,
				MinRetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			l := newLogger(t, testConfig(t, sink))
			ev := Event{Verb: VerbBind, Pod: Pod{Namespace: "db", Name: "p"}}
			if tt.big {
				ev.Error = string(bytes.Repeat([]byte("x"), 2048))
			}
			l.Enqueue(ev)
			closeLogger(t, l)
			if n := testutil.ToFloat64(l.Dropped().WithLabelValues(tt.reason)); n != 1 {
				t.Errorf("dropped{%s} = %v, want 1", tt.reason, n)
			}
		})
	}
}

// TestStalledReceiverNeverBlocks: a receiver that never answers fills the
// buffer, and Enqueue keeps returning at once, counting what it drops.
func TestStalledReceiverNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	sink, err := NewHTTPSink(HTTPConfig{URL: srv.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, sink)
	cfg.MaxEvents, cfg.FlushBytes = 10, 1
	l := newLogger(t, cfg)
	const n = 1000
	start := time.Now()
	kept := 0
	for i := range n {
		if l.Enqueue(Event{DecisionID: fmt.Sprint(i), Verb: VerbFilter}) {
			kept++
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("%d Enqueue calls took %v with a stalled receiver", n, d)
	}
	// At most the buffer plus one batch held by the stalled upload were kept.
	if kept > 2*cfg.MaxEvents {
		t.Errorf("kept %d events, want at most %d", kept, 2*cfg.MaxEvents)
	}
	if got := testutil.ToFloat64(l.Dropped().WithLabelValues(ReasonBufferEvents)); int(got) != n-kept {
		t.Errorf("dropped{%s} = %v, want %d", ReasonBufferEvents, got, n-kept)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := l.Close(ctx); err == nil {
		t.Error("Close with a stalled receiver returned nil, want the cut-short error")
	}
}

func TestBufferBytesBound(t *testing.T) {
	cfg := testConfig(t, &captureSink{})
	cfg.MaxBytes, cfg.FlushBytes = 4096, 1<<30
	l := newLogger(t, cfg)
	kept := 0
	for range 100 {
		if l.Enqueue(Event{Verb: VerbFilter, Pod: Pod{Namespace: "db", Name: "p"}}) {
			kept++
		}
	}
	closeLogger(t, l)
	got := testutil.ToFloat64(l.Dropped().WithLabelValues(ReasonBufferBytes))
	if kept == 0 || kept == 100 || int(got) != 100-kept {
		t.Errorf("kept %d, dropped{%s} = %v; want some of 100 kept and the rest counted", kept, ReasonBufferBytes, got)
	}
	if n := testutil.ToFloat64(l.Dropped().WithLabelValues(ReasonClosed)); n != 0 {
		t.Errorf("dropped{closed} = %v before any late Enqueue", n)
	}
	l.Enqueue(Event{})
	if n := testutil.ToFloat64(l.Dropped().WithLabelValues(ReasonClosed)); n != 1 {
		t.Errorf("dropped{closed} = %v after Enqueue on a closed logger, want 1", n)
	}
}

func TestFileSinkAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	for i := range 2 {
		sink, err := NewFileSink(path)
		if err != nil {
			t.Fatal(err)
		}
		l := newLogger(t, testConfig(t, sink))
		l.Enqueue(Event{DecisionID: fmt.Sprint("d-", i), Verb: VerbBind})
		closeLogger(t, l)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range decodeLines(t, b) {
		got = append(got, m["decision_id"].(string))
	}
	if diff := cmp.Diff([]string{"d-0", "d-1"}, got); diff != "" {
		t.Errorf("file lines (-want +got):\n%s", diff)
	}
}

func TestGeneratedDecisionIDs(t *testing.T) {
	sink := &captureSink{}
	l := newLogger(t, testConfig(t, sink))
	l.Enqueue(Event{Verb: VerbFilter})
	l.Enqueue(Event{Verb: VerbFilter})
	closeLogger(t, l)
	var got []string
	for _, b := range sink.events {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m["decision_id"].(string))
	}
	if diff := cmp.Diff([]string{"regosched-0-0", "regosched-0-1"}, got); diff != "" {
		t.Errorf("decision IDs (-want +got):\n%s", diff)
	}
}

func TestConfigErrors(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no sink", Config{Log: log}},
		{"no log", Config{Sink: &captureSink{}}},
		{"rate above 1", Config{Sink: &captureSink{}, Log: log, SampleRate: 1.5}},
		{"rate below 0", Config{Sink: &captureSink{}, Log: log, SampleRate: -0.1}},
		{"bad mask mode", Config{Sink: &captureSink{}, Log: log, MaskMode: "hash"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if l, err := New(tt.cfg); err == nil {
				_ = l.Close(context.Background())
				t.Error("New returned no error")
			}
		})
	}
	if _, err := NewHTTPSink(HTTPConfig{}); err == nil {
		t.Error("NewHTTPSink without a URL returned no error")
	}
	reg := prometheus.NewRegistry()
	cfg := Config{Sink: &captureSink{}, Log: log, Registerer: reg}
	l := newLogger(t, cfg)
	defer closeLogger(t, l)
	if l2, err := New(cfg); err == nil {
		_ = l2.Close(context.Background())
		t.Error("second logger on one registry returned no error, want the duplicate registration")
	}
}

// BenchmarkEnqueue measures Enqueue with the logger encoding and writing to
// io.Discard on its own goroutine; allocs/op include that goroutine's.
func BenchmarkEnqueue(b *testing.B) {
	cfg := testConfig(b, NewWriterSink(io.Discard))
	cfg.Registerer = nil
	cfg.FlushBytes = 1 << 20
	l := newLogger(b, cfg)
	defer closeLogger(b, l)
	ev := Event{
		Verb:    VerbFilter,
		Pod:     Pod{Namespace: "db", Name: "redis-0", UID: "u-1", Labels: map[string]string{"app": "redis", "role": "master"}},
		Nodes:   []string{"n1", "n2", "n3"},
		Bundles: map[string]string{"regosched": "rev-7"},
		Denied:  []Denial{{Node: "n2", Rule: "masters_apart", Peer: "db/redis-1"}},
		Outcome: "filtered",
	}
	b.ReportAllocs()
	for b.Loop() {
		l.Enqueue(ev)
	}
}

// BenchmarkEnqueueFull measures the drop path: a full buffer, no sink work.
func BenchmarkEnqueueFull(b *testing.B) {
	cfg := testConfig(b, NewWriterSink(io.Discard))
	cfg.Registerer = nil
	cfg.MaxEvents, cfg.FlushBytes = 1, 1<<30
	l := newLogger(b, cfg)
	defer closeLogger(b, l)
	l.Enqueue(Event{Verb: VerbFilter})
	ev := Event{Verb: VerbFilter, Pod: Pod{Namespace: "db", Name: "redis-0"}}
	b.ReportAllocs()
	for b.Loop() {
		l.Enqueue(ev)
	}
}

func TestTimestampDefaultsToNow(t *testing.T) {
	var buf bytes.Buffer
	cfg := testConfig(t, NewWriterSink(&buf))
	cfg.Now = func() time.Time { return testTime.In(time.FixedZone("X", 3600)) }
	l := newLogger(t, cfg)
	l.Enqueue(Event{Verb: VerbFilter})
	closeLogger(t, l)
	got := decodeLines(t, buf.Bytes())
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	if diff := cmp.Diff("2026-12-07T05:00:00.000000123Z", got[0]["timestamp"]); diff != "" {
		t.Errorf("timestamp (-want +got):\n%s", diff)
	}
}
