package shadow

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/fixture"
)

// TestOpen: the shadow bundle loads with the active policy's checks but
// not its data overlay, and a Shadow judges with it; a bundle that could
// never be activated is refused.
func TestOpen(t *testing.T) {
	fsys := policytest.VariantFS(t, policytest.KeepClusterApart)
	policytest.SetRevision(t, fsys, "stricter-1")
	good := policytest.WriteDir(t, fsys, t.TempDir())
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "policy.rego"), []byte("package regosched\n\nthis is not rego {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	active := bundles.Config{Default: regosched.DefaultPolicy()}
	tests := []struct {
		name         string
		path         string
		active       bundles.Config
		wantRevision string
		wantErr      string // "" opens
		notExist     bool
	}{
		{name: "a good bundle", path: good, active: active, wantRevision: "stricter-1"},
		{
			name: "the active policy's data overlay is not applied", path: good, wantRevision: "stricter-1",
			active: bundles.Config{Default: regosched.DefaultPolicy(), DataFile: filepath.Join(t.TempDir(), "missing.yaml")},
		},
		{name: "no path", active: active, wantErr: "no bundle path"},
		{name: "missing bundle", path: filepath.Join(t.TempDir(), "missing"), active: active, wantErr: "loading the shadow bundle", notExist: true},
		{name: "bundle that does not compile", path: broken, active: active, wantErr: "loading the shadow bundle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			b, err := Open(context.Background(), tt.active, tt.path, Config{Nodes: fixture.Nodes{}, Registerer: prometheus.NewRegistry(), Log: log})
			got := map[string]any{"err": err != nil && strings.Contains(err.Error(), tt.wantErr), "notExist": errors.Is(err, os.ErrNotExist), "revision": ""}
			want := map[string]any{"err": tt.wantErr != "", "notExist": tt.notExist, "revision": tt.wantRevision}
			if err == nil {
				got["revision"] = b.Shadow.cfg.Policies.Load().Revision()
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Open() = %v (-want +got):\n%s", err, diff)
			}
		})
	}
}

// TestBundleRunStopsWithItsContext: the workers and the reloads end with ctx.
func TestBundleRunStopsWithItsContext(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	dir := policytest.WriteDir(t, policytest.VariantFS(t, policytest.KeepClusterApart), t.TempDir())
	active := bundles.Config{Default: regosched.DefaultPolicy(), Poll: 10 * time.Millisecond}
	b, err := Open(context.Background(), active, dir, Config{Nodes: fixture.Nodes{}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	cancel()
	<-done
}
