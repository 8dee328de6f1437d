package extender

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/frontend/decision"
)

// stubDecider answers with fixed values and records what it was asked.
type stubDecider struct {
	filter     *extenderv1.ExtenderFilterResult
	priorities extenderv1.HostPriorityList
	preemption *extenderv1.ExtenderPreemptionResult
	err        error
	got        *extenderv1.ExtenderArgs
	gotPreempt *extenderv1.ExtenderPreemptionArgs
	gotBind    *extenderv1.ExtenderBindingArgs
}

// keepArgs copies what a test reads of args after the request: the
// handler recycles NodeNames once it has answered.
func keepArgs(args *extenderv1.ExtenderArgs) *extenderv1.ExtenderArgs {
	kept := *args
	if args.NodeNames != nil {
		names := slices.Clone(*args.NodeNames)
		kept.NodeNames = &names
	}
	return &kept
}

// Filter fails the candidates s.filter fails, with its reasons.
func (s *stubDecider) Filter(_ context.Context, args *extenderv1.ExtenderArgs) (*decision.FilterAnswer, error) {
	s.got = keepArgs(args)
	if s.err != nil {
		return nil, s.err
	}
	return decision.NewFilterAnswer(args, s.filter.FailedNodes, s.filter.FailedAndUnresolvableNodes), nil
}

func (s *stubDecider) Prioritize(_ context.Context, args *extenderv1.ExtenderArgs) (iter.Seq2[string, int64], error) {
	s.got = keepArgs(args)
	if s.err != nil {
		return nil, s.err
	}
	return func(yield func(string, int64) bool) {
		for _, p := range s.priorities {
			if !yield(p.Host, p.Score) {
				return
			}
		}
	}, nil
}

func (s *stubDecider) Preempt(_ context.Context, args *extenderv1.ExtenderPreemptionArgs) (*extenderv1.ExtenderPreemptionResult, error) {
	s.gotPreempt = args
	return s.preemption, s.err
}

func (s *stubDecider) Bind(_ context.Context, args *extenderv1.ExtenderBindingArgs) error {
	s.gotBind = args
	return s.err
}

func newServer(t *testing.T, d Decider, ready func() error) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	log, _ := logtest.NewNullLogger()
	if ready == nil {
		ready = func() error { return nil }
	}
	h, err := New(Config{
		URLPrefix:    "/scheduler",
		MaxBodyBytes: 4096,
		Decider:      d,
		Ready:        ready,
		Version:      func() any { return map[string]string{"version": "v-test", "policyRevision": "rev-1"} },
		Registerer:   reg,
		Gatherer:     reg,
		Log:          log,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, reg
}

const validArgs = `{"Pod":{"metadata":{"name":"p","namespace":"ns"}},"NodeNames":["n1","n2"]}`

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasSuffix(url, "/metrics") && ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, url, ct)
	}
	return resp.StatusCode, string(b)
}

func TestBadRequests(t *testing.T) {
	stub := &stubDecider{filter: &extenderv1.ExtenderFilterResult{}}
	srv, _ := newServer(t, stub, nil)
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantError  string
	}{
		{"malformed JSON", "POST", "/scheduler/filter", `{"Pod": {`, 400, "decoding ExtenderArgs"},
		{"not an object", "POST", "/scheduler/filter", `[1,2]`, 400, "decoding ExtenderArgs"},
		{"wrong field type", "POST", "/scheduler/prioritize", `{"Pod":{},"NodeNames":"n1"}`, 400, "decoding ExtenderArgs"},
		{"empty body", "POST", "/scheduler/filter", ``, 400, "decoding ExtenderArgs: unexpected end of JSON input"},
		{"trailing data", "POST", "/scheduler/filter", validArgs + `{}`, 400, "decoding ExtenderArgs: invalid character '{' after top-level value"},
		{"no pod", "POST", "/scheduler/filter", `{"NodeNames":["n1"]}`, 400, "ExtenderArgs has no Pod"},
		{"no nodes", "POST", "/scheduler/prioritize", `{"Pod":{}}`, 400, "neither NodeNames nor Nodes"},
		{"too large", "POST", "/scheduler/filter", `{"Pod":{},"NodeNames":["` + strings.Repeat("n", 5000) + `"]}`, 413, "request body exceeds 4096 bytes"},
		{"wrong method", "GET", "/scheduler/filter", ``, 405, "method GET not allowed"},
		{"wrong method on health", "POST", "/healthz", ``, 405, "method POST not allowed"},
		{"unknown verb", "POST", "/scheduler/bindz", validArgs, 404, "no such endpoint"},
		{"preempt without pod", "POST", "/scheduler/preempt", `{"NodeNameToMetaVictims":{}}`, 400, "ExtenderPreemptionArgs has no Pod"},
		{"preempt malformed", "POST", "/scheduler/preempt", `{"Pod":`, 400, "decoding ExtenderPreemptionArgs"},
		{"bind without node", "POST", "/scheduler/bind", `{"PodName":"p","PodNamespace":"ns","PodUID":"u"}`, 400, "needs PodName, PodNamespace, PodUID and Node"},
		{"bind malformed", "POST", "/scheduler/bind", `{"PodName":1}`, 400, "decoding ExtenderBindingArgs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub.got, stub.gotPreempt, stub.gotBind = nil, nil, nil
			status, body := do(t, tt.method, srv.URL+tt.path, tt.body)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", status, tt.wantStatus, body)
			}
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("error body %q is not JSON: %v", body, err)
			}
			if !strings.Contains(e.Error, tt.wantError) {
				t.Errorf("error = %q, want it to contain %q", e.Error, tt.wantError)
			}
			if stub.got != nil || stub.gotPreempt != nil || stub.gotBind != nil {
				t.Errorf("decider was called for a bad request")
			}
		})
	}
}

func TestVerbs(t *testing.T) {
	nodes := []string{"n2"}
	stub := &stubDecider{
		filter: &extenderv1.ExtenderFilterResult{
			NodeNames:                  &nodes,
			FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"n1": "redis: master ns/m already on this node"},
		},
		priorities: extenderv1.HostPriorityList{{Host: "n2", Score: 10}},
	}
	srv, reg := newServer(t, stub, nil)

	status, body := do(t, "POST", srv.URL+"/scheduler/filter", validArgs)
	if status != 200 {
		t.Fatalf("filter status = %d, body %s", status, body)
	}
	var fr extenderv1.ExtenderFilterResult
	if err := json.Unmarshal([]byte(body), &fr); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stub.filter, &fr); diff != "" {
		t.Errorf("filter result mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&[]string{"n1", "n2"}, stub.got.NodeNames); diff != "" {
		t.Errorf("decoded NodeNames mismatch (-want +got):\n%s", diff)
	}
	if stub.got.Pod.Name != "p" || stub.got.Pod.Namespace != "ns" {
		t.Errorf("decoded pod = %s/%s, want ns/p", stub.got.Pod.Namespace, stub.got.Pod.Name)
	}

	status, body = do(t, "POST", srv.URL+"/scheduler/prioritize", validArgs)
	if status != 200 {
		t.Fatalf("prioritize status = %d, body %s", status, body)
	}
	var pr extenderv1.HostPriorityList
	if err := json.Unmarshal([]byte(body), &pr); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stub.priorities, pr); diff != "" {
		t.Errorf("prioritize result mismatch (-want +got):\n%s", diff)
	}

	if got, _ := testutil.GatherAndCount(reg, "regosched_requests_total"); got != 2 {
		t.Errorf("regosched_requests_total has %d series, want 2 (filter ok, prioritize ok)", got)
	}
}

func TestPreemptAndBind(t *testing.T) {
	stub := &stubDecider{preemption: &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
		"n1": {Pods: []*extenderv1.MetaPod{{UID: "v1"}}},
	}}}
	srv, _ := newServer(t, stub, nil)

	status, body := do(t, "POST", srv.URL+"/scheduler/preempt",
		`{"Pod":{"metadata":{"name":"p","namespace":"ns"}},"NodeNameToMetaVictims":{"n1":{"Pods":[],"NumPDBViolations":0}}}`)
	var pr extenderv1.ExtenderPreemptionResult
	if err := json.Unmarshal([]byte(body), &pr); err != nil {
		t.Fatal(err)
	}
	if status != 200 {
		t.Fatalf("preempt status = %d, body %s", status, body)
	}
	if diff := cmp.Diff(stub.preemption, &pr); diff != "" {
		t.Errorf("preempt result mismatch (-want +got):\n%s", diff)
	}

	status, body = do(t, "POST", srv.URL+"/scheduler/bind", `{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n1"}`)
	if status != 200 || strings.TrimSpace(body) != `{"Error":""}` {
		t.Errorf("bind = %d %s, want 200 with an empty Error", status, body)
	}
	want := &extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "ns", PodUID: "u", Node: "n1"}
	if diff := cmp.Diff(want, stub.gotBind); diff != "" {
		t.Errorf("decoded binding args mismatch (-want +got):\n%s", diff)
	}

	stub.err = errors.New("refused: binding ns/p to n1 would break a rule")
	status, body = do(t, "POST", srv.URL+"/scheduler/bind", `{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n1"}`)
	if status != 200 || !strings.Contains(body, "would break a rule") {
		t.Errorf("refused bind = %d %s, want 200 with the reason in Error", status, body)
	}
}

func TestDecisionErrors(t *testing.T) {
	stub := &stubDecider{err: errors.New("evaluating data.regosched.claims: boom")}
	srv, _ := newServer(t, stub, nil)

	// Filter errors travel in the result's Error field, which the scheduler
	// reports in its logs and events.
	status, body := do(t, "POST", srv.URL+"/scheduler/filter", validArgs)
	var fr extenderv1.ExtenderFilterResult
	if err := json.Unmarshal([]byte(body), &fr); err != nil {
		t.Fatal(err)
	}
	if status != 200 || fr.Error != stub.err.Error() {
		t.Errorf("filter = %d %+v, want 200 with Error %q", status, fr, stub.err)
	}
	// HostPriorityList has no error field: the status says it.
	status, body = do(t, "POST", srv.URL+"/scheduler/prioritize", validArgs)
	if status != 500 || !strings.Contains(body, "boom") {
		t.Errorf("prioritize = %d %s, want 500 naming the error", status, body)
	}
}

func TestHealthReadyVersionMetrics(t *testing.T) {
	readyErr := errors.New("placement cache has not synced with the API server yet")
	srv, _ := newServer(t, &stubDecider{}, func() error { return readyErr })

	if status, _ := do(t, "GET", srv.URL+"/healthz", ""); status != 200 {
		t.Errorf("healthz = %d, want 200 even when not ready", status)
	}
	status, body := do(t, "GET", srv.URL+"/readyz", "")
	if status != 503 || !strings.Contains(body, "not synced") {
		t.Errorf("readyz = %d %s, want 503 with the reason", status, body)
	}
	// Verbs are refused, not answered from a cache that has not synced.
	status, body = do(t, "POST", srv.URL+"/scheduler/filter", validArgs)
	if status != 503 || !strings.Contains(body, "not ready: placement cache has not synced") {
		t.Errorf("filter while not ready = %d %s, want 503 with the reason", status, body)
	}
	readyErr = nil
	if status, _ := do(t, "GET", srv.URL+"/readyz", ""); status != 200 {
		t.Errorf("readyz = %d, want 200 once ready", status)
	}
	status, body = do(t, "GET", srv.URL+"/version", "")
	if status != 200 || !strings.Contains(body, `"policyRevision":"rev-1"`) {
		t.Errorf("version = %d %s", status, body)
	}
	do(t, "POST", srv.URL+"/scheduler/filter", `{`)
	status, body = do(t, "GET", srv.URL+"/metrics", "")
	if status != 200 || !strings.Contains(body, `regosched_requests_total{outcome="bad_request",verb="filter"} 1`) ||
		!strings.Contains(body, "regosched_request_duration_seconds_bucket") {
		t.Errorf("metrics = %d, missing request metrics:\n%s", status, body)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	srv, _ := newServer(t, panicky{}, nil)
	status, body := do(t, "POST", srv.URL+"/scheduler/filter", validArgs)
	if status != 500 || !strings.Contains(body, "internal error") {
		t.Errorf("got %d %s, want 500 internal error", status, body)
	}
}

type panicky struct{}

func (panicky) Filter(context.Context, *extenderv1.ExtenderArgs) (*decision.FilterAnswer, error) {
	panic("bug")
}

func (panicky) Prioritize(context.Context, *extenderv1.ExtenderArgs) (iter.Seq2[string, int64], error) {
	panic("bug")
}

func (panicky) Preempt(context.Context, *extenderv1.ExtenderPreemptionArgs) (*extenderv1.ExtenderPreemptionResult, error) {
	panic("bug")
}

func (panicky) Bind(context.Context, *extenderv1.ExtenderBindingArgs) error { panic("bug") }

// TestPrioritizeAnswer: the decider's list is written as it is, and no
// list (no node scores) as [], so that the answer is always a JSON list.
func TestPrioritizeAnswer(t *testing.T) {
	tests := []struct {
		name string
		give extenderv1.HostPriorityList
		want string
	}{
		{"no node scores", nil, `[]`},
		{"empty list", extenderv1.HostPriorityList{}, `[]`},
		{"scores", extenderv1.HostPriorityList{{Host: "n1", Score: 3}, {Host: "n2", Score: 10}}, `[{"Host":"n1","Score":3},{"Host":"n2","Score":10}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newServer(t, &stubDecider{priorities: tt.give}, nil)
			status, body := do(t, "POST", srv.URL+"/scheduler/prioritize", validArgs)
			if status != http.StatusOK || strings.TrimSpace(body) != tt.want {
				t.Errorf("prioritize = %d %s, want 200 %s", status, body, tt.want)
			}
		})
	}
}
