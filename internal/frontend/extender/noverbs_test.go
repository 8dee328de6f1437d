package extender

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// TestNoVerbs: with NoVerbs, every verb answers 404 with its text, whatever
// the method, while health, readiness, version and metrics are served.
func TestNoVerbs(t *testing.T) {
	const why = "no verbs here: test"
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_gauge", Help: "A metric of the process."}))
	log, _ := logtest.NewNullLogger()
	h, err := New(Config{
		URLPrefix: "/scheduler", NoVerbs: why,
		Ready: func() error { return nil }, Version: func() any { return "v-test" },
		Registerer: reg, Gatherer: reg, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tests := []struct {
		method, path, body string
		wantStatus         int
		wantBody           string
	}{
		{"POST", "/scheduler/filter", validArgs, 404, why},
		{"POST", "/scheduler/prioritize", validArgs, 404, why},
		{"POST", "/scheduler/preempt", `{}`, 404, why},
		{"POST", "/scheduler/bind", `{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"}`, 404, why},
		{"GET", "/scheduler/filter", "", 404, why},
		{"GET", "/healthz", "", 200, `"ok"`},
		{"GET", "/readyz", "", 200, `"ok"`},
		{"GET", "/version", "", 200, "v-test"},
		{"GET", "/metrics", "", 200, "test_gauge 0"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			status, body := do(t, tt.method, srv.URL+tt.path, tt.body)
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.path, status, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

// TestNoDeciderNoVerbs: a Config with neither a Decider nor NoVerbs is
// refused, rather than failing every verb call later.
func TestNoDeciderNoVerbs(t *testing.T) {
	reg := prometheus.NewRegistry()
	log, _ := logtest.NewNullLogger()
	_, err := New(Config{Ready: func() error { return nil }, Registerer: reg, Gatherer: reg, Log: log})
	if err == nil || !strings.Contains(err.Error(), "Decider is required") {
		t.Errorf("New() = %v, want an error saying a Decider is required", err)
	}
}
