// Package decisionlogtest is an OPA decision log service for tests: the
// unit tests of internal/ops/decisionlog and internal/frontend/serve and the end-to-end
// tests of both builds post to it as they would to a real collector. It is
// a package of its own, not a _test.go file, so that they share one
// receiver; only tests import it.
package decisionlogtest

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
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

// WaitBound waits, within timeout, until r holds a "bound" bind event for
// every pod of pods (names, in namespace ns), a pod's last decision, and
// returns the events r holds then.
func WaitBound(ctx context.Context, t testing.TB, r *Receiver, ns string, pods []string, timeout time.Duration) []Event {
	t.Helper()
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		bound := map[string]bool{}
		for _, e := range Events[Event](t, r) {
			if e.Path == "regosched/bind" && e.Result.Outcome == "bound" && e.Input.Pod.Namespace == ns {
				bound[e.Input.Pod.Name] = true
			}
		}
		missing = missing[:0]
		for _, p := range pods {
			if !bound[p] {
				missing = append(missing, p)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		t.Fatalf("no bound bind event for %d pods: %s", len(missing), strings.Join(missing, ", "))
	}
	if problems := r.Problems(); len(problems) > 0 {
		t.Errorf("the receiver refused uploads: %s", strings.Join(problems, "; "))
	}
	return Events[Event](t, r)
}

// Burst is what the events of a burst of pods say, for the test's log.
type Burst struct {
	// Decisions counts the events of the burst's namespace.
	Decisions int
	// ByVerb counts them by "path outcome", e.g. "regosched/bind bound".
	ByVerb map[string]int
	// Denials counts the denials, in WithDenials events.
	Denials, WithDenials int
}

// CheckBurst checks the events of a burst in namespace ns, as both builds
// must log it: each decision ID once, every event naming its policy
// revision, a filter event for every pod of nodes (name to the node the
// API server bound it to; a bound bind event must name that node, unless
// it is ""), every denial with its node, rule and a peer of ns, and some
// denial at all (the burst's rules turn nodes away).
func CheckBurst(t testing.TB, events []Event, ns string, nodes map[string]string) Burst {
	t.Helper()
	b := Burst{ByVerb: map[string]int{}}
	filtered := map[string]bool{}
	ids := map[string]bool{}
	for _, e := range events {
		if e.Input.Pod.Namespace != ns {
			continue
		}
		b.Decisions++
		b.ByVerb[e.Path+" "+e.Result.Outcome]++
		if ids[e.DecisionID] {
			t.Errorf("decision ID %s given twice", e.DecisionID)
		}
		ids[e.DecisionID] = true
		if e.Bundles["regosched"]["revision"] == "" {
			t.Errorf("event %s names no policy revision: %v", e.DecisionID, e.Bundles)
		}
		switch e.Path {
		case "regosched/filter":
			filtered[e.Input.Pod.Name] = true
		case "regosched/bind":
			if want := nodes[e.Input.Pod.Name]; e.Result.Outcome == "bound" && want != "" && e.Result.Node != want {
				t.Errorf("bind event %s: %s bound to %s, the API server says %s", e.DecisionID, e.Input.Pod.Name, e.Result.Node, want)
			}
		}
		if len(e.Result.Denied) > 0 {
			b.WithDenials++
		}
		for _, d := range e.Result.Denied {
			b.Denials++
			if d.Node == "" || d.Rule == "" || !strings.HasPrefix(d.Peer, ns+"/") {
				t.Errorf("event %s (%s of %s): denial %+v lacks its node, rule or peer", e.DecisionID, e.Path, e.Input.Pod.Name, d)
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(nodes)) {
		if !filtered[p] {
			t.Errorf("no filter event for pod %s", p)
		}
	}
	if b.WithDenials == 0 {
		t.Error("no event denies a node: the burst's rules should turn some nodes away")
	}
	return b
}

// Verbs lists ByVerb as "path outcome: n", sorted, for a log line.
func (b Burst) Verbs() string {
	var out []string
	for v, n := range b.ByVerb {
		out = append(out, fmt.Sprintf("%s: %d", v, n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
