package assembly

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// closeSink counts its Close calls.
type closeSink struct{ closed atomic.Int32 }

func (*closeSink) Write(context.Context, [][]byte) error { return nil }
func (s *closeSink) Close() error                        { s.closed.Add(1); return nil }

func quiet() *logrus.Logger {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return log
}

// config is an Open of the embedded policy over a fake cluster.
func config(sink decisionlog.Sink) Config {
	client := fake.NewClientset()
	log := quiet()
	return Config{
		Policy: bundles.Config{Default: regosched.DefaultPolicy()},
		NewCache: func(keys placement.KeyFunc) (*placement.Cache, error) {
			return placement.New(client, keys, log)
		},
		DecisionLog: decisionlog.Config{Sink: sink, SampleRate: 1},
		Names:       Names{ShadowPolicy: "--shadow-policy", DecisionLog: "--decision-log"},
		Registerer:  prometheus.NewRegistry(),
		Log:         log,
	}
}

// TestOpenFails: a part that cannot be opened fails Open with an error
// naming its setting, and the decision log's sink is closed, not leaked.
func TestOpenFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{"no logger", func(c *Config) { c.Log = nil }, "Config.Log, Registerer and NewCache are required"},
		{"a policy that is not there", func(c *Config) { c.Policy.Path = missing }, missing},
		{"a cache that cannot be made", func(c *Config) {
			c.NewCache = func(placement.KeyFunc) (*placement.Cache, error) { return nil, errors.New("no informers") }
		}, "no informers"},
		{"a shadow policy that is not there", func(c *Config) { c.ShadowPolicy = missing }, "--shadow-policy " + missing + ": "},
		{"a decision log that cannot start", func(c *Config) { c.DecisionLog.SampleRate = 2 }, "--decision-log: decisionlog: sample rate 2 outside 0..1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &closeSink{}
			cfg := config(sink)
			tt.change(&cfg)
			_, err := Open(context.Background(), cfg)
			got := map[string]any{"named": err != nil && strings.Contains(err.Error(), tt.wantErr), "sink closed": sink.closed.Load()}
			if diff := cmp.Diff(map[string]any{"named": true, "sink closed": int32(1)}, got); diff != "" {
				t.Errorf("Open() = %v (-want +got):\n%s", err, diff)
			}
		})
	}
}

// TestOpenRunClose: Open makes every part asked for, Run re-indexes the
// cache under a reloaded policy before it is stored, and Close flushes
// the decision log and closes its sink.
func TestOpenRunClose(t *testing.T) {
	tests := []struct {
		name   string
		shadow string
		sink   *closeSink
	}{
		{name: "the policy alone"},
		{name: "a shadow policy and a decision log", shadow: "../../../rego", sink: &closeSink{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			data := filepath.Join(t.TempDir(), "data.json")
			write(t, data, `{}`)
			var sink decisionlog.Sink
			if tt.sink != nil {
				sink = tt.sink
			}
			cfg := config(sink)
			cfg.Policy.DataFile, cfg.Policy.Poll, cfg.ShadowPolicy = data, 20*time.Millisecond, tt.shadow
			reindexed := make(chan struct{}, 1)
			cfg.Reindexed = func(context.Context) {
				select {
				case reindexed <- struct{}{}:
				default:
				}
			}
			p, err := Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{"shadow": p.Shadow != nil, "decision log": p.DecisionLog != nil}
			want := map[string]bool{"shadow": tt.shadow != "", "decision log": tt.sink != nil}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
			first := p.Active.Load()
			done := make(chan struct{})
			go func() { p.Run(ctx); close(done) }()
			write(t, data, `{"workloads":{"redis":{"protected_roles":[]}}}`)
			select {
			case <-reindexed:
			case <-time.After(20 * time.Second):
				t.Fatal("no re-index within 20s of a policy change")
			}
			if p.Active.Load() == first {
				t.Error("the reloaded policy was not stored")
			}
			cancel()
			<-done
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if tt.sink != nil && tt.sink.closed.Load() != 1 {
				t.Errorf("sink closed %d times, want once", tt.sink.closed.Load())
			}
		})
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
