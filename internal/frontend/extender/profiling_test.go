package extender

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

func TestProfiling(t *testing.T) {
	for _, tc := range []struct {
		name      string
		profiling bool
		want      int
	}{
		{"off by default", false, http.StatusNotFound},
		{"on", true, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			log, _ := logtest.NewNullLogger()
			h, err := New(Config{
				URLPrefix: "/scheduler", Decider: &stubDecider{}, Ready: func() error { return nil },
				Version: func() any { return nil }, Registerer: reg, Gatherer: reg, Profiling: tc.profiling, Log: log,
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap"} {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("GET %s: status %d, want %d", path, resp.StatusCode, tc.want)
				}
			}
		})
	}
}
