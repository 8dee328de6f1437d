package extender

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// TestVerbPortServesVerbsOnly: with VerbsOnly, the verb port answers the
// verbs and nothing that tells the policy's errors or the cluster's shape;
// a replica that is Ready but not Serving (a standby) refuses the verbs.
func TestVerbPortServesVerbsOnly(t *testing.T) {
	tests := []struct {
		name       string
		serving    error
		method     string
		path       string
		body       string
		wantStatus int
		wantBody   string // substring
	}{
		{"filter", nil, "POST", "/scheduler/filter", validArgs, 200, `"NodeNames"`},
		{"metrics", nil, "GET", "/metrics", "", 404, "no such endpoint /metrics"},
		{"version", nil, "GET", "/version", "", 404, "no such endpoint /version"},
		{"readyz", nil, "GET", "/readyz", "", 404, "no such endpoint /readyz"},
		{"healthz", nil, "GET", "/healthz", "", 404, "no such endpoint /healthz"},
		{"standby refuses filter", errors.New("not the leader"), "POST", "/scheduler/filter", validArgs, 503, "not ready: not the leader"},
		{"standby refuses bind", errors.New("not the leader"), "POST", "/scheduler/bind",
			`{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"}`, 503, "not ready: not the leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			log, _ := logtest.NewNullLogger()
			stub := &stubDecider{filter: &extenderv1.ExtenderFilterResult{NodeNames: &[]string{"node-1"}}}
			h, err := New(Config{
				URLPrefix: "/scheduler", Decider: stub, VerbsOnly: true,
				Ready:      func() error { return nil },
				Serving:    func() error { return tt.serving },
				Version:    func() any { return "v-test" },
				Registerer: reg, Gatherer: reg, Log: log,
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			status, body := do(t, tt.method, srv.URL+tt.path, tt.body)
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.path, status, body, tt.wantStatus, tt.wantBody)
			}
			if tt.serving != nil && (stub.got != nil || stub.gotBind != nil) {
				t.Error("a replica that is not serving called the decider")
			}
		})
	}
}
