package extender

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// TestHealthHandler: the health-only handler answers health, readiness,
// version and metrics exactly like the full API, and nothing that decides
// or binds, even with a decider in its Config and profiling on.
func TestHealthHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	log, _ := logtest.NewNullLogger()
	readyErr := errors.New("not the leader")
	stub := &stubDecider{filter: &extenderv1.ExtenderFilterResult{}}
	cfg := Config{
		URLPrefix:  "/scheduler",
		Decider:    stub,
		Ready:      func() error { return readyErr },
		Version:    func() any { return map[string]string{"version": "v-test"} },
		Registerer: reg,
		Gatherer:   reg,
		Profiling:  true,
		Log:        log,
	}
	// The full API on the same Config, so that its request metrics exist:
	// NewHealth must not register them a second time.
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	probe := prometheus.NewCounter(prometheus.CounterOpts{Name: "regosched_test_probe_total", Help: "test"})
	reg.MustRegister(probe)
	probe.Inc()
	srv := httptest.NewServer(NewHealth(cfg))
	t.Cleanup(srv.Close)

	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantBody   string // substring
	}{
		{"healthz", "GET", "/healthz", "", 200, `"status":"ok"`},
		{"readyz while not ready", "GET", "/readyz", "", 503, `"error":"not the leader"`},
		{"version", "GET", "/version", "", 200, `"version":"v-test"`},
		{"metrics", "GET", "/metrics", "", 200, "regosched_test_probe_total 1"},
		{"filter", "POST", "/scheduler/filter", validArgs, 404, "no such endpoint /scheduler/filter"},
		{"prioritize", "POST", "/scheduler/prioritize", validArgs, 404, "no such endpoint"},
		{"preempt", "POST", "/scheduler/preempt", `{"Pod":{}}`, 404, "no such endpoint"},
		{"bind", "POST", "/scheduler/bind", `{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"}`, 404, "no such endpoint"},
		{"profiling", "GET", "/debug/pprof/", "", 404, "no such endpoint"},
		{"wrong method", "POST", "/healthz", "", 405, "method POST not allowed on /healthz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := do(t, tt.method, srv.URL+tt.path, tt.body)
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.path, status, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
	if stub.got != nil || stub.gotPreempt != nil || stub.gotBind != nil {
		t.Error("the health handler called the decider")
	}

	readyErr = nil
	status, body := do(t, "GET", srv.URL+"/readyz", "")
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("readyz body %q: %v", body, err)
	}
	if diff := cmp.Diff(map[string]string{"status": "ok"}, got); status != 200 || diff != "" {
		t.Errorf("readyz once ready = %d, body mismatch (-want +got):\n%s", status, diff)
	}
}
