package extender

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// addSeeds adds the request bodies under testdata/requests/<verb>/ (shared
// with the fuzz corpus) plus a few hostile ones.
func addSeeds(f *testing.F, verb string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "requests", verb, "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	if len(files) == 0 {
		f.Fatalf("no seed requests in testdata/requests/%s", verb)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{``, `{`, `null`, `[]`, `{"Pod":null}`, `{"Pod":{}}{}`, `{"Pod":{"metadata":{"labels":{"a":1}}}}`,
		`{"NodeNameToMetaVictims":{"n":null}}`, `{"PodUID":"\u0000"}`} {
		f.Add([]byte(s))
	}
}

// fuzzVerb posts arbitrary bodies to one verb of the real handler (with a
// decider that accepts everything) and checks it answers with a sane status
// and never panics (the recoverer would turn a panic into a 500).
func fuzzVerb(f *testing.F, verb string) {
	addSeeds(f, verb)
	log, _ := logtest.NewNullLogger()
	reg := prometheus.NewRegistry()
	h, err := New(Config{
		URLPrefix: "/scheduler", MaxBodyBytes: 1 << 16,
		Decider:    &stubDecider{filter: &extenderv1.ExtenderFilterResult{}, preemption: &extenderv1.ExtenderPreemptionResult{}},
		Ready:      func() error { return nil },
		Version:    func() any { return nil },
		Registerer: reg, Gatherer: reg, Log: log,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/scheduler/"+verb, bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}

func FuzzFilter(f *testing.F)     { fuzzVerb(f, "filter") }
func FuzzPrioritize(f *testing.F) { fuzzVerb(f, "prioritize") }
func FuzzPreempt(f *testing.F)    { fuzzVerb(f, "preempt") }
func FuzzBind(f *testing.F)       { fuzzVerb(f, "bind") }
