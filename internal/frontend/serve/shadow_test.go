package serve

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
)

// TestShadowPolicyAtStart: a shadow bundle that could never be activated
// is refused before regosched serves, with an error that names the flag;
// a good one starts.
func TestShadowPolicyAtStart(t *testing.T) {
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "policy.rego"), []byte("package regosched\n\nthis is not rego {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		shadow   string
		verbs    bool
		wantErr  string // "" starts
		notExist bool
	}{
		{name: "missing bundle", shadow: filepath.Join(t.TempDir(), "missing"), verbs: true, wantErr: "--shadow-policy", notExist: true},
		{name: "bundle that does not compile", shadow: broken, verbs: true, wantErr: "--shadow-policy " + broken},
		{name: "no verbs to judge it beside", shadow: broken, verbs: false, wantErr: "--shadow-policy needs the verbs"},
		{name: "good bundle starts", shadow: "../../../rego", verbs: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			addr := freeAddr(t)
			opts := Options{
				Listen: addr, Client: fake.NewClientset(), Policy: bundles.Config{Default: regosched.DefaultPolicy()},
				ShadowPolicy: tt.shadow, URLPrefix: "/scheduler", Version: "test", Verbs: tt.verbs, SchedulerName: "regosched", Log: log,
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- Run(ctx, opts) }()
			if tt.wantErr != "" {
				select {
				case err := <-done:
					got := map[string]bool{"named": err != nil && strings.Contains(err.Error(), tt.wantErr), "notExist": errors.Is(err, os.ErrNotExist)}
					if diff := cmp.Diff(map[string]bool{"named": true, "notExist": tt.notExist}, got); diff != "" {
						t.Errorf("Run() = %v (-want +got):\n%s", err, diff)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("Run() did not refuse the shadow bundle")
				}
				return
			}
			if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
				return get("http://"+addr+"/healthz") == http.StatusOK, nil
			}); err != nil {
				t.Fatalf("healthz never answered: %v", err)
			}
			stopRun(t, cancel, done)
		})
	}
}
