// Package decisionlogtest is an OPA decision log service for tests: the
// unit tests of internal/decisionlog and internal/serve and the end-to-end
// tests of both builds post to it as they would to a real collector. It is
// a package of its own, not a _test.go file, so that they share one
// receiver; only tests import it.
package decisionlogtest

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// Receiver takes what OPA's decision_logs plugin sends its service: POST
// /logs, a gzip'd JSON array of events. What it refuses is recorded as a
// problem (Problems), answered 400, and never kept.
type Receiver struct {
	// Fail answers 503 to this many more uploads, as a collector that is
	// restarting does.
	Fail atomic.Int32

	stall   bool
	release chan struct{}

	mu       sync.Mutex
	events   []json.RawMessage
	uploads  int
	maxBody  int
	auth     []string
	problems []string
}

// Start serves r on loopback, where a child process reaches it too, until
// the test ends; it returns its URL.
func Start(t testing.TB) (*Receiver, string) {
	t.Helper()
	return start(t, &Receiver{})
}

// StartStalled serves a receiver that never answers: each upload waits
// until its client gives up or the test ends.
func StartStalled(t testing.TB) (*Receiver, string) {
	t.Helper()
	return start(t, &Receiver{stall: true})
}

func start(t testing.TB, r *Receiver) (*Receiver, string) {
	r.release = make(chan struct{})
	srv := httptest.NewServer(r)
	t.Cleanup(func() { close(r.release); srv.Close() })
	return r, srv.URL
}

// ServeHTTP takes one upload.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.stall {
		select {
		case <-req.Context().Done():
		case <-r.release:
		}
		return
	}
	if r.Fail.Load() > 0 {
		r.Fail.Add(-1)
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	batch, size, err := decode(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.problems = append(r.problems, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.events = append(r.events, batch...)
	r.uploads++
	r.maxBody = max(r.maxBody, size)
	r.auth = append(r.auth, req.Header.Get("Authorization"))
}

// decode checks an upload's request line and headers and returns its
// events and its size un-gzipped.
func decode(req *http.Request) ([]json.RawMessage, int, error) {
	if req.Method != http.MethodPost || req.URL.Path != "/logs" {
		return nil, 0, fmt.Errorf("%s %s, want POST /logs", req.Method, req.URL.Path)
	}
	if ce, ct := req.Header.Get("Content-Encoding"), req.Header.Get("Content-Type"); ce != "gzip" || ct != "application/json" {
		return nil, 0, fmt.Errorf("Content-Encoding %q, Content-Type %q; want gzip, application/json", ce, ct)
	}
	zr, err := gzip.NewReader(req.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("gzip: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, 0, fmt.Errorf("gunzip: %w", err)
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(raw, &batch); err != nil {
		return nil, 0, fmt.Errorf("decoding the array: %w", err)
	}
	if batch == nil {
		return nil, 0, errors.New("not a JSON array")
	}
	return batch, len(raw), nil
}

// Uploads is the number of uploads taken.
func (r *Receiver) Uploads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.uploads
}

// MaxUpload is the size of the largest upload taken, un-gzipped.
func (r *Receiver) MaxUpload() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxBody
}

// Auth are the Authorization headers of the uploads taken, in order.
func (r *Receiver) Auth() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.auth)
}

// Problems are the uploads refused, as errors.
func (r *Receiver) Problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.problems)
}

// Events decodes the events taken so far into T, a map or a struct of
// the fields a test reads.
func Events[T any](t testing.TB, r *Receiver) []T {
	t.Helper()
	r.mu.Lock()
	raw := slices.Clone(r.events)
	r.mu.Unlock()
	out := make([]T, len(raw))
	for i, e := range raw {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, e)
		}
	}
	return out
}

// Event is what end-to-end tests read of an event, as OPA's EventV1
// encodes it: who decided, about which pod, under which bundle revision,
// and the result with its denials.
type Event struct {
	DecisionID string                       `json:"decision_id"`
	Path       string                       `json:"path"`
	Bundles    map[string]map[string]string `json:"bundles"`
	Input      struct {
		Pod struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"pod"`
	} `json:"input"`
	Result struct {
		Outcome string `json:"outcome"`
		Node    string `json:"node"`
		Denied  []struct {
			Node string `json:"node"`
			Rule string `json:"rule"`
			Peer string `json:"peer"`
		} `json:"denied"`
	} `json:"result"`
}
