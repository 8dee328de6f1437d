package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/repair"
	"github.com/regosched/regosched/internal/plumbing/tlsserve"
)

// TestUnreachableAPIServerIsNotReady: with no API server to sync from,
// regosched serves health but is not ready and refuses to decide; it still
// shuts down cleanly.
func TestUnreachableAPIServerIsNotReady(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	// Port 1 on loopback: nothing listens there, connections are refused.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	log, _ := logtest.NewNullLogger()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Listen: addr, Kubeconfig: kubeconfig, Policy: bundles.Config{Default: regosched.DefaultPolicy()},
			URLPrefix: "/scheduler", Version: "test", Verbs: true, SchedulerName: "regosched", KubeAPIQPS: 10, KubeAPIBurst: 10, Log: log,
		})
	}()

	base := "http://" + addr
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return get(base+"/healthz") == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("healthz never answered: %v", err)
	}
	// Give the informers time to fail a few list attempts; readiness must hold at 503.
	for range 10 {
		if got := get(base + "/readyz"); got != http.StatusServiceUnavailable {
			t.Fatalf("readyz = %d, want 503 without an API server", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Post(base+"/scheduler/filter", "application/json",
		strings.NewReader(`{"Pod":{"metadata":{"name":"p","namespace":"ns"}},"NodeNames":["n1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("filter = %d, want 503 while not ready", resp.StatusCode)
	}

	stopRun(t, cancel, done)
}

func TestBrokenPolicyPathFailsFast(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	err := Run(context.Background(), Options{Listen: freeAddr(t), Policy: bundles.Config{Path: filepath.Join(t.TempDir(), "missing")}, Verbs: true, SchedulerName: "regosched", Log: log})
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Run() = %v, want a not-exist error for the policy path", err)
	}
}

// TestOptionsChecksAtStart: settings that would let a caller steer
// regosched are refused before it builds anything.
func TestOptionsChecksAtStart(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		// An empty name once let bind authorise a pod of any scheduler
		// (issue 34 item 9).
		{"no scheduler name", Options{Verbs: true}, "--scheduler-name is empty"},
		// Names to allow, but no client certificates asked for (item 8).
		{"allowed client names over plain HTTP", Options{Verbs: true, SchedulerName: "regosched", TLS: tlsserve.Files{AllowedClientNames: []string{"regosched-scheduler"}}},
			"--tls-allowed-client-names needs --tls-cert-file and --client-ca-file"},
		{"allowed client names without a client CA", Options{Verbs: true, SchedulerName: "regosched", TLS: tlsserve.Files{CertFile: "tls.crt", KeyFile: "tls.key", AllowedClientNames: []string{"regosched-scheduler"}}},
			"--tls-allowed-client-names needs --tls-cert-file and --client-ca-file"},
		// Repairs follow the audit's passes: without them it would never act.
		{"repair without the audit", Options{Verbs: true, SchedulerName: "regosched", Repair: RepairOptions{Mode: repair.On}},
			"--repair=on needs the audit"},
		// A Secret to watch with no Deployment to roll would watch for nothing.
		{"client certificate Secret without its Deployment", Options{Verbs: true, SchedulerName: "regosched", CertRoll: CertRollOptions{Secret: "regosched-scheduler-client-tls"}},
			"--scheduler-client-secret and --scheduler-deployment go together"},
		{"client certificate watch without a namespace", Options{Verbs: true, SchedulerName: "regosched", CertRoll: CertRollOptions{Secret: "s", Deployment: "d"}},
			"--scheduler-client-secret needs --pod-namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			tt.opts.Listen, tt.opts.Policy.Default, tt.opts.Log = freeAddr(t), regosched.DefaultPolicy(), log
			err := Run(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// stopRun cancels a Run and waits for it to return nil.
func stopRun(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v, want nil after cancel", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run() did not return after cancel")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return fmt.Sprint(ln.Addr())
}

func get(url string) int {
	resp, err := http.Get(url) //nolint:gosec,noctx // loopback test URL
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
