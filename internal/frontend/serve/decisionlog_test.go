package serve

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/ops/decisionlog/decisionlogtest"
)

// TestDecisionLogOptionsAtStart: decision log settings that name nothing,
// or would send a token in clear, are refused before regosched serves.
func TestDecisionLogOptionsAtStart(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	tests := []struct {
		name string
		dl   decisionlog.Settings
		want string
	}{
		{"sample above 1", decisionlog.Settings{Target: "stdout", SampleRate: 1.5}, "--decision-log-sample 1.5: want a share between 0 and 1"},
		{"unknown mask mode", decisionlog.Settings{Target: "stdout", SampleRate: 1, MaskMode: "hash"}, `--decision-log-mask-mode "hash": want drop or replace`},
		{"a scheme that is no HTTP", decisionlog.Settings{Target: "ftp://logs.example", SampleRate: 1}, `--decision-log "ftp://logs.example": want stdout, a file path or an http(s):// URL`},
		{"a URL without a host", decisionlog.Settings{Target: "https:///logs", SampleRate: 1}, "no host"},
		{"a token in clear", decisionlog.Settings{Target: "http://logs.example", SampleRate: 1, BearerTokenFile: token}, "would send the token in clear"},
		{"HTTP settings for a file", decisionlog.Settings{Target: "/tmp/decisions.jsonl", SampleRate: 1, CACertFile: "ca.pem"}, "--decision-log-ca-cert is for an http(s):// --decision-log"},
		{"negative buffer", decisionlog.Settings{Target: "stdout", SampleRate: 1, BufferEvents: -1}, "cannot be negative"},
		{"a file in no directory", decisionlog.Settings{Target: filepath.Join(t.TempDir(), "missing", "d.jsonl"), SampleRate: 1}, "--decision-log: decisionlog: open log file"},
		{"a CA file that is not there", decisionlog.Settings{Target: "https://logs.example", SampleRate: 1, CACertFile: filepath.Join(t.TempDir(), "ca.pem")}, "--decision-log-ca-cert"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			err := Run(context.Background(), Options{
				Listen: freeAddr(t), Client: fake.NewClientset(), Policy: bundles.Config{Default: regosched.DefaultPolicy()},
				Verbs: true, SchedulerName: "regosched", DecisionLog: tt.dl, Log: log,
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("no verbs", func(t *testing.T) {
		log, _ := logtest.NewNullLogger()
		err := Run(context.Background(), Options{Listen: freeAddr(t), Client: fake.NewClientset(),
			Policy: bundles.Config{Default: regosched.DefaultPolicy()}, DecisionLog: decisionlog.Settings{Target: "stdout", SampleRate: 1}, Log: log})
		if err == nil || !strings.Contains(err.Error(), "--decision-log needs the verbs") {
			t.Errorf("Run() = %v, want the verbs asked for", err)
		}
	})
}

// TestDecisionLogReachesReceiver: with --decision-log at an OPA decision
// log service, a filter call's event reaches it, at the latest when
// regosched shuts down, and the dropped counter is on /metrics.
func TestDecisionLogReachesReceiver(t *testing.T) {
	rcv, url := decisionlogtest.Start(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	log, _ := logtest.NewNullLogger()
	addr := freeAddr(t)
	opts := Options{
		Listen: addr, Client: fake.NewClientset(node), Policy: bundles.Config{Default: regosched.DefaultPolicy()},
		URLPrefix: "/scheduler", Version: "test", Verbs: true, SchedulerName: "regosched", Log: log,
		DecisionLog: decisionlog.Settings{Target: url, SampleRate: 1, MaskLabels: []string{"team"}, FlushInterval: time.Hour},
	}
	opts.Leader.Identity = "replica-0"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	base := "http://" + addr
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return get(base+"/readyz") == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("never ready: %v", err)
	}
	resp, err := http.Post(base+"/scheduler/filter", "application/json", strings.NewReader(
		`{"Pod":{"metadata":{"name":"web-0","namespace":"shop","uid":"u-1","labels":{"app":"web","team":"payments"}}},"NodeNames":["node-1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("filter = %d", resp.StatusCode)
	}
	metrics, err := http.Get(base + "/metrics") //nolint:noctx // loopback test URL
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(metrics.Body)
	_ = metrics.Body.Close()
	if !strings.Contains(string(body), `regosched_decision_logs_dropped_total{reason="buffer_events"} 0`) {
		t.Errorf("/metrics has no regosched_decision_logs_dropped_total at 0")
	}
	stopRun(t, cancel, done) // the flush interval is an hour: Close sends it

	if p := rcv.Problems(); len(p) > 0 {
		t.Fatalf("receiver refused uploads: %v", p)
	}
	events := decisionlogtest.Events[map[string]any](t, rcv)
	if len(events) != 1 {
		t.Fatalf("receiver got %d events, want 1: %v", len(events), events)
	}
	e := events[0]
	got := map[string]any{"path": e["path"], "labels": e["labels"], "input": e["input"], "result": e["result"], "erased": e["erased"]}
	want := map[string]any{
		"path":   "regosched/filter",
		"labels": map[string]any{"id": "replica-0", "version": "test"},
		"input": map[string]any{"pod": map[string]any{"namespace": "shop", "name": "web-0", "uid": "u-1", "labels": map[string]any{"app": "web"}},
			"nodes": []any{"node-1"}, "node_count": float64(1)},
		"result": map[string]any{"outcome": "feasible"},
		"erased": []any{"/input/pod/labels/team"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

// TestDecisionLogFile: a file target gets one JSON line per decision,
// readable only by its owner.
func TestDecisionLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	log, _ := logtest.NewNullLogger()
	addr := freeAddr(t)
	opts := Options{
		Listen: addr, Client: fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}),
		Policy: bundles.Config{Default: regosched.DefaultPolicy()}, URLPrefix: "/scheduler", Version: "test",
		Verbs: true, SchedulerName: "regosched", Log: log, DecisionLog: decisionlog.Settings{Target: path, SampleRate: 1},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	base := "http://" + addr
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return get(base+"/readyz") == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("never ready: %v", err)
	}
	for range 2 {
		resp, err := http.Post(base+"/scheduler/filter", "application/json", strings.NewReader(
			`{"Pod":{"metadata":{"name":"web-0","namespace":"shop","uid":"u-1"}},"NodeNames":["node-1"]}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	stopRun(t, cancel, done)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if diff := cmp.Diff([]any{2, os.FileMode(0o600)}, []any{len(lines), fi.Mode().Perm()}); diff != "" {
		t.Errorf("lines, mode (-want +got):\n%s", diff)
	}
}
