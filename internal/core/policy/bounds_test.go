package policy

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/model"
)

// slowRule is true after ten billion products, none negative: hours of
// work in little memory, unless cancelled.
const slowRule = `count([1 | some i in numbers.range(1, 100000); some j in numbers.range(1, 100000); i * j < 0]) == 0`

// slowPolicy describes a pod labelled slow=yes for hours, and any other at
// once, so that it passes Compile's smoke test.
func slowPolicy() fstest.MapFS {
	return fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains "all"

claims := {"marks": {"m": "slow"}, "separate": [], "spread": []} if {
	input.pod.labels.slow == "yes"
	` + slowRule + `
}
`)},
	}
}

// testTimeout is the deadline the tests give an evaluation off the request
// path, instead of DescribeTimeout's seconds.
const testTimeout = 100 * time.Millisecond

// compileWithTimeout compiles fsys with each evaluation off the request
// path cut short after timeout.
func compileWithTimeout(t *testing.T, fsys fstest.MapFS, timeout time.Duration) (*Policy, error) {
	t.Helper()
	return compile(context.Background(), readFS(t, fsys, false), timeout)
}

// returnsInTime runs f and returns its error, failing the test when f takes
// much longer than testTimeout; one that never returns (no deadline at all)
// is given up on after 10s, so that the test fails rather than hangs.
func returnsInTime(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f() }()
	select {
	case err := <-done:
		if elapsed := time.Since(start); elapsed > testTimeout+2*time.Second {
			t.Errorf("%s returned after %v, want about %v", what, elapsed, testTimeout)
		}
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still evaluating after 10s, want an error after about %v", what, testTimeout)
		return nil
	}
}

// TestDescribersStopAtDeadline: the informers describe pods with a context
// that never ends, so Describer and PendingDescriber give each evaluation
// its own deadline, and a policy that loops on a pod is an error naming the
// pod (the pod is then not indexed or pre-described), not a stuck informer.
func TestDescribersStopAtDeadline(t *testing.T) {
	p, err := compileWithTimeout(t, slowPolicy(), testTimeout)
	if err != nil {
		t.Fatalf("compile() error = %v", err)
	}
	current := func() *Policy { return p }
	slow := &model.Pod{Namespace: "default", Name: "slow-0", UID: "slow-0",
		Labels: model.NewLabels(map[string]string{"slow": "yes"})}
	tests := []struct {
		name     string
		describe func(context.Context, *model.Pod) error
	}{
		{"Describer", func(ctx context.Context, pod *model.Pod) error {
			_, _, err := Describer(current)(ctx, pod)
			return err
		}},
		{"PendingDescriber", func(ctx context.Context, pod *model.Pod) error {
			_, _, _, err := PendingDescriber(current, nil)(ctx, pod)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := returnsInTime(t, tt.name, func() error { return tt.describe(context.Background(), slow) })
			if !errors.Is(err, context.DeadlineExceeded) || !topdown.IsCancel(err) {
				t.Fatalf("%s error = %v, want OPA's cancellation for context.DeadlineExceeded", tt.name, err)
			}
			if !strings.Contains(err.Error(), "describing pod default/slow-0") {
				t.Errorf("%s error = %v, want it to name the pod", tt.name, err)
			}
		})
	}
	t.Run("other pods are described", func(t *testing.T) {
		fast := &model.Pod{Namespace: "default", Name: "fast-0", UID: "fast-0"}
		keys, _, err := Describer(current)(context.Background(), fast)
		if err != nil {
			t.Fatalf("Describer() error = %v", err)
		}
		if diff := cmp.Diff([]string{"all"}, keys); diff != "" {
			t.Errorf("Describer() keys (-want +got):\n%s", diff)
		}
	})
}

// TestCompileStopsLoopingPolicy: Compile's own evaluations (the data check
// and the smoke test on a sample pod) have the same deadline, so that a
// policy that loops on every pod is refused rather than hanging a reload
// whose context never ends.
func TestCompileStopsLoopingPolicy(t *testing.T) {
	tests := []struct {
		name   string
		module string
	}{
		{"peer_keys", `package regosched

peer_keys contains "all" if ` + slowRule + `

claims := {"marks": {}}
`},
		{"claims", `package regosched

peer_keys contains "all"

claims := {"marks": {"m": "slow"}} if ` + slowRule + `
`},
		{"validate", `package regosched

peer_keys contains "all"

claims := {"marks": {}}

validate.errors contains "slow" if not ` + slowRule + `
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := returnsInTime(t, "compile()", func() error {
				_, err := compileWithTimeout(t, fstest.MapFS{"regosched/p.rego": {Data: []byte(tt.module)}}, testTimeout)
				return err
			})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("compile() error = %v, want context.DeadlineExceeded", err)
			}
		})
	}
}

// TestNetworkBuiltinsRefused: a bundle may not reach the network from the
// scheduler (http.send, net.*) nor read its environment (opa.runtime), in
// its decision modules or, with RunTests, in its tests; the refusal says so
// and where.
func TestNetworkBuiltinsRefused(t *testing.T) {
	// Nothing may reach this server: a policy that did would count here.
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()

	const keys = "package regosched\n\nclaims := {\"marks\": {}}\n\n"
	tests := []struct {
		name  string
		files map[string]string
		// want is the refused builtin and where it is called; "" accepts.
		want string
	}{
		{"http.send", map[string]string{"regosched/p.rego": keys +
			`peer_keys contains r.body.key if r := http.send({"method": "GET", "url": "` + srv.URL + `"})` + "\n"},
			"regosched/p.rego:5: rego_type_error: undefined function http.send"},
		{"net.lookup_ip_addr", map[string]string{"regosched/p.rego": keys +
			`peer_keys contains ip if some ip in net.lookup_ip_addr("localhost")` + "\n"},
			"regosched/p.rego:5: rego_type_error: undefined function net.lookup_ip_addr"},
		{"net.cidr_contains", map[string]string{"regosched/p.rego": keys +
			`peer_keys contains "ten" if net.cidr_contains("10.0.0.0/8", "10.1.2.3")` + "\n"},
			"regosched/p.rego:5: rego_type_error: undefined function net.cidr_contains"},
		{"opa.runtime", map[string]string{"regosched/p.rego": keys +
			`peer_keys contains k if some k, _ in opa.runtime().env` + "\n"},
			"regosched/p.rego:5: rego_type_error: undefined function opa.runtime"},
		{"http.send in a test", map[string]string{
			"regosched/p.rego": keys + `peer_keys contains "all"` + "\n",
			"regosched/p_test.rego": "package regosched_test\n\n" +
				`test_send if http.send({"method": "GET", "url": "` + srv.URL + `"}).status_code == 200` + "\n",
		}, "regosched/p_test.rego:3: rego_type_error: undefined function http.send"},
		{"good", map[string]string{
			"regosched/p.rego": keys + `peer_keys contains "all" if regex.match("^a", "abc")` + "\n",
			"regosched/p_test.rego": "package regosched_test\n\n" +
				`test_keys if "all" in data.regosched.peer_keys` + "\n",
		}, ""},
		// A schema's remote $ref is no builtin of its own: it is not
		// fetched (no host is allowed), so match_schema fails, the rule is
		// undefined and the data has no error; fetched, the schema (a
		// string) would not match {} and the bundle would be refused.
		{"remote schema", map[string]string{"regosched/p.rego": keys +
			`peer_keys contains "all"

validate.errors contains "fetched" if {
	result := json.match_schema({}, {"$ref": "` + srv.URL + `/schema.json"})
	result[0] == false
}
`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, content := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(content)}
			}
			before := hits.Load()
			err := compileAndTest(t, fsys)
			if got := hits.Load() - before; got != 0 {
				t.Errorf("the policy made %d requests, want none", got)
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Compile() or RunTests() error = %v, want it accepted", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Compile() and RunTests() accepted the bundle, want it refused with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compile() or RunTests() error = %v, want it to say %q", err, tt.want)
			}
			if !errors.Is(err, errRefusedBuiltin) {
				t.Errorf("Compile() or RunTests() error = %v, want it to say network builtins are not allowed", err)
			}
		})
	}
}

// TestShippedPolicyNeedsNoRefusedBuiltin: the default policy embedded in
// the binary, and its tests, compile under the restricted capabilities.
func TestShippedPolicyNeedsNoRefusedBuiltin(t *testing.T) {
	if err := compileAndTest(t, regosched.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
}

// compileAndTest compiles the bundle at the root of fsys without its tests
// and runs its tests, as internal/core/bundles does with RunTests set.
func compileAndTest(t *testing.T, fsys fs.FS) error {
	t.Helper()
	b := readFS(t, fsys, true)
	decisions := *b
	decisions.Modules = slices.DeleteFunc(slices.Clone(b.Modules), func(m bundle.ModuleFile) bool { return IsTest(m.Path) })
	if _, err := Compile(context.Background(), &decisions); err != nil {
		return err
	}
	return RunTests(context.Background(), b)
}

// TestCapabilitiesRefuseOnlyThose: of this OPA's builtins, the
// capabilities leave out exactly those named here, so that an OPA upgrade
// that adds or drops one is looked at.
func TestCapabilitiesRefuseOnlyThose(t *testing.T) {
	kept := map[string]bool{}
	for _, b := range capabilities().Builtins {
		kept[b.Name] = true
	}
	var got []string
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if !kept[b.Name] {
			got = append(got, b.Name)
		}
	}
	want := []string{
		"http.send",
		"net.cidr_contains",
		"net.cidr_contains_matches",
		"net.cidr_expand",
		"net.cidr_intersects",
		"net.cidr_is_valid",
		"net.cidr_merge",
		"net.cidr_overlap",
		"net.lookup_ip_addr",
		"opa.runtime",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("builtins refused (-want +got):\n%s", diff)
	}
}
