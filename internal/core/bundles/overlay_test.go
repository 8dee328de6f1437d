package bundles

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// valkeyWorkload is the default redis entry, matching app.kubernetes.io/name=valkey.
func valkeyWorkload(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(defaultBundleDir, "regosched", "config", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	w := data["workloads"].(map[string]any)["redis"].(map[string]any)
	w["match_labels"] = map[string]any{"app.kubernetes.io/name": "valkey"}
	return w
}

func writeOverlay(t *testing.T, dir string, v any) string {
	t.Helper()
	raw, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	p := filepath.Join(dir, "data.json")
	if err := os.WriteFile(p, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDataOverlay: --policy-data changes the default policy's settings
// without a bundle: a workload added, a label scheme changed, a workload
// removed; a misspelt or malformed overlay is refused like a broken bundle.
func TestDataOverlay(t *testing.T) {
	valkey := fixture.MakePod().Namespace("shop").Name("valkey-0").Labels(map[string]string{
		"app.kubernetes.io/name": "valkey", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "master",
	}).Model()
	redisByPartOf := fixture.MakePod().Namespace("shop").Name("redis-0").Labels(map[string]string{
		"app.kubernetes.io/name": "redis", "app.kubernetes.io/part-of": "cache", "app.kubernetes.io/component": "master",
	}).Model()
	redis := fixture.MakePod().Namespace("shop").Name("redis-1").Redis("cache", "master", "").Model()
	tests := []struct {
		name    string
		overlay any
		grouped map[string]bool // pod name -> has peer keys
		wantErr string
	}{
		{"no overlay", nil, map[string]bool{"valkey-0": false, "redis-0": false, "redis-1": true}, ""},
		{"a workload added", map[string]any{"workloads": map[string]any{"valkey": valkeyWorkload(t)}},
			map[string]bool{"valkey-0": true, "redis-0": false, "redis-1": true}, ""},
		{"a label scheme changed", map[string]any{"workloads": map[string]any{"redis": map[string]any{"cluster_label": "app.kubernetes.io/part-of"}}},
			map[string]bool{"valkey-0": false, "redis-0": true, "redis-1": false}, ""},
		{"a workload removed", map[string]any{"workloads": map[string]any{"redis": nil}},
			map[string]bool{"valkey-0": false, "redis-0": false, "redis-1": false}, ""},
		{"a misspelt key", map[string]any{"workloads": map[string]any{"redis": map[string]any{"cluster_lable": "x"}}}, nil, "cluster_lable"},
		{"not an object", `["workloads"]`, nil, "want a JSON object"},
		{"not JSON", `{"workloads":`, nil, "policy data overlay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts Options
			if tt.overlay != nil {
				opts.DataFile = writeOverlay(t, t.TempDir(), tt.overlay)
			}
			p, err := opts.Load(context.Background(), defaultBundleDir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			got := map[string]bool{}
			for _, pd := range []*model.Pod{valkey, redisByPartOf, redis} {
				keys, _, err := p.Describe(context.Background(), pd)
				if err != nil {
					t.Fatal(err)
				}
				got[pd.Name] = len(keys) > 0
			}
			if diff := cmp.Diff(tt.grouped, got); diff != "" {
				t.Errorf("grouped pods (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDataOverlayLeavesTheBundleAlone: the overlay is merged into a copy.
func TestDataOverlayLeavesTheBundleAlone(t *testing.T) {
	b, err := Options{}.read(defaultBundleDir)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(b.Data)
	file := writeOverlay(t, t.TempDir(), map[string]any{"workloads": map[string]any{"redis": nil}})
	if _, err := withDataOverlay(b, file, DefaultBundleSizeLimit); err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(b.Data)
	if string(before) != string(after) {
		t.Error("withDataOverlay modified the bundle it was given")
	}
	if _, err := withDataOverlay(b, file, 10); err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Errorf("withDataOverlay(limit 10) error = %v, want it refused as too large", err)
	}
}

// TestWatcherReloadsTheDataOverlay: with the embedded default policy, a
// change of the overlay's content is loaded; a broken one is refused and
// the last good policy stays.
func TestWatcherReloadsTheDataOverlay(t *testing.T) {
	dir := t.TempDir()
	file := writeOverlay(t, dir, map[string]any{})
	opts := Options{DataFile: file}
	fsys := os.DirFS(defaultBundleDir)
	first, err := opts.LoadFS(context.Background(), fsys, EmbeddedName)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := WatchFingerprint("", file)
	if err != nil {
		t.Fatal(err)
	}
	active, err := NewActive(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	active.Store(first)
	log, _ := logtest.NewNullLogger()
	w := &Watcher{FS: fsys, Interval: 20 * time.Millisecond, Options: opts, Active: active, Log: log, Loaded: loaded}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	valkey := fixture.MakePod().Namespace("shop").Name("valkey-0").Labels(map[string]string{
		"app.kubernetes.io/name": "valkey", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "master",
	}).Model()
	grouped := func() bool {
		keys, _, err := active.Load().Describe(context.Background(), valkey)
		return err == nil && len(keys) > 0
	}
	if grouped() {
		t.Fatal("valkey grouped before the overlay adds it")
	}
	writeOverlay(t, dir, map[string]any{"workloads": map[string]any{"valkey": valkeyWorkload(t)}})
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return grouped(), nil }); err != nil {
		t.Fatalf("the overlay's new workload never became active: %v", err)
	}
	writeOverlay(t, dir, `{"workloads": {"valkey": {"match_lables": {}}}}`)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return active.Status().LastError != "", nil }); err != nil {
		t.Fatalf("a misspelt overlay was not reported: %v", err)
	}
	if !grouped() {
		t.Error("a misspelt overlay replaced the last good policy")
	}
}
