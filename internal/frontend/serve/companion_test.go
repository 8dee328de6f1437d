package serve

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	k8stesting "k8s.io/client-go/testing"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/repair"
	"github.com/regosched/regosched/internal/plumbing/leader"
)

// TestCompanionServesNoVerbs: with Verbs off (regosched beside
// regosched-scheduler) and no scheduler name, every verb answers 404 saying
// why, health and metrics are served, no decider or pending pods are built,
// and the leader still runs the Redis roles with their memory, the audit
// and the repair.
func TestCompanionServesNoVerbs(t *testing.T) {
	const rolesMemory, repairState = "roles-memory", "repair-state"
	client := haCluster()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr := freeAddr(t)
	log, _ := logtest.NewNullLogger()
	opts := Options{
		Listen: addr, Client: client, Policy: bundles.Config{Default: regosched.DefaultPolicy()},
		URLPrefix: "/scheduler", Version: "test", Verbs: false, LeaderElect: true,
		RedisRoles:    RedisRolesOptions{On: true, Memory: rolesMemory},
		AuditInterval: time.Hour, // the first pass comes at once
		Repair:        RepairOptions{Mode: repair.Plan, ConfigMap: repairState},
		Log:           log,
	}
	opts.Leader = leader.Config{Namespace: haNamespace, Name: "regosched", Identity: "regosched-a",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		PodNamespace: haNamespace, PodName: "regosched-a"}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	base := "http://" + addr
	until(t, "ready", func() bool { return get(base+"/readyz") == http.StatusOK })

	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantBody                 string
	}{
		{"filter", http.MethodPost, "/scheduler/filter", `{"Pod":{"metadata":{"name":"web","namespace":"shop"}},"NodeNames":["node-1"]}`, http.StatusNotFound, NoVerbs},
		{"prioritize", http.MethodPost, "/scheduler/prioritize", `{"Pod":{"metadata":{"name":"web","namespace":"shop"}},"NodeNames":["node-1"]}`, http.StatusNotFound, NoVerbs},
		{"preempt", http.MethodPost, "/scheduler/preempt", `{"Pod":{"metadata":{"name":"web","namespace":"shop"}}}`, http.StatusNotFound, NoVerbs},
		{"bind", http.MethodPost, "/scheduler/bind", `{"PodName":"web","PodNamespace":"shop","PodUID":"uid-web","Node":"node-1"}`, http.StatusNotFound, NoVerbs},
		{"healthz", http.MethodGet, "/healthz", "", http.StatusOK, `"ok"`},
		{"readyz", http.MethodGet, "/readyz", "", http.StatusOK, `"ok"`},
		{"version", http.MethodGet, "/version", "", http.StatusOK, `"version":"test"`},
		{"metrics", http.MethodGet, "/metrics", "", http.StatusOK, "regosched_cached_nodes 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := send(tt.method, base+tt.path, tt.body)
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.path, status, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
	// Metrics registered as soon as a decider or the pending pods exist.
	_, metrics := send(http.MethodGet, base+"/metrics", "")
	for _, name := range []string{"regosched_pending_pods", "regosched_inflight_wait_seconds"} {
		if strings.Contains(metrics, name) {
			t.Errorf("/metrics has %s: a decider or the pending pods were built without the verbs", name)
		}
	}

	until(t, "an audit pass", func() bool {
		_, m := send(http.MethodGet, base+"/metrics", "")
		return strings.Contains(m, `regosched_audit_runs_total{result="success"}`)
	})
	until(t, "the Redis roles to read their memory and the repair its state", func() bool {
		return readConfigMap(client.Actions(), rolesMemory) && readConfigMap(client.Actions(), repairState)
	})
	stopRun(t, cancel, done)
}

// readConfigMap reports whether actions read the ConfigMap name.
func readConfigMap(actions []k8stesting.Action, name string) bool {
	for _, a := range actions {
		if g, ok := a.(k8stesting.GetAction); ok && a.GetVerb() == "get" && a.GetResource().Resource == "configmaps" && g.GetName() == name {
			return true
		}
	}
	return false
}
