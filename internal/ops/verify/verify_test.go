package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// clusterSnapshot is the snapshot of testdata/snapshots/README.md: Redis
// cache in shop and Elasticsearch logs in search on node-a..c, with
// logs-elasticsearch-data-2 pending.
var clusterSnapshot, _ = filepath.Abs("../../../testdata/snapshots/cluster.yaml")

func defaultPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := bundles.Options{}.LoadFS(context.Background(), regosched.DefaultPolicy(), bundles.EmbeddedName)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.ErrorLevel)
	return l
}

// writeSuite writes body, after a header naming the suite and the
// cluster snapshot, to a file of dir.
func writeSuite(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	head := "apiVersion: regosched.io/v1alpha1\nkind: Suite\nmetadata:\n  name: " + name + "\nsnapshot: " + clusterSnapshot + "\n"
	if err := os.WriteFile(path, []byte(head+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs the suites of paths; they may name testdata's snapshots from a
// temporary directory.
func run(t *testing.T, paths ...string) *Report {
	t.Helper()
	suites, err := Discover(paths)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), suites, Options{Policy: defaultPolicy(t), PolicySource: "embedded", AllowOutsideSuite: true, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checks are a report's checks of its one case.
func checks(t *testing.T, r *Report) []Check {
	t.Helper()
	if len(r.Suites) != 1 || len(r.Suites[0].Cases) != 1 {
		t.Fatalf("want one suite of one case, got %+v", r.Suites)
	}
	c := r.Suites[0].Cases[0]
	if c.Error != "" {
		t.Fatalf("case did not run: %s", c.Error)
	}
	return c.Checks
}

// TestChecks: each kind of expectation passes when the policy decides so,
// and fails with what was wanted and what the policy decided when it does
// not. The data pod logs-elasticsearch-data-2 is denied node-b and node-c
// (each holds a data pod of its cluster) and allowed node-a.
func TestChecks(t *testing.T) {
	const dataPod = "cases:\n- name: c\n  pod: search/logs-elasticsearch-data-2\n  expect:\n"
	tests := []struct {
		name   string
		expect string
		want   []Check
	}{
		{
			name:   "allowed and denied, by rule and peer, as decided",
			expect: "    allowed: [node-a]\n    denied:\n    - {node: node-b, rule: elasticsearch-data, peer: search/logs-elasticsearch-data-0, resolvable: false}\n    - {node: node-c}\n",
			want: []Check{
				{Name: "node-a allowed", Passed: true, Want: "allowed", Got: "allowed (score 0)"},
				{
					Name: "node-b denied by elasticsearch-data", Passed: true,
					Want: "denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)",
					Got:  "denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)",
				},
				{Name: "node-c denied", Passed: true, Want: "denied", Got: "denied by elasticsearch-data (peer search/logs-elasticsearch-data-1) (unresolvable)"},
			},
		},
		{
			name:   "a node expected allowed is denied",
			expect: "    allowed: [node-b]\n",
			want: []Check{{
				Name: "node-b allowed", Want: "allowed",
				Got: "denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)",
			}},
		},
		{
			name:   "a node expected denied is allowed",
			expect: "    denied: [{node: node-a, rule: elasticsearch-data}]\n",
			want:   []Check{{Name: "node-a denied by elasticsearch-data", Want: "denied by elasticsearch-data", Got: "allowed (score 0)"}},
		},
		{
			name:   "denied for another peer than expected",
			expect: "    denied: [{node: node-b, rule: elasticsearch-data, peer: search/logs-elasticsearch-data-1}]\n",
			want: []Check{{
				Name: "node-b denied by elasticsearch-data",
				Want: "denied by elasticsearch-data (peer search/logs-elasticsearch-data-1)",
				Got:  "denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)",
			}},
		},
		{
			name:   "denied by another rule than expected",
			expect: "    denied: [{node: node-b, rule: redis-masters}]\n",
			want: []Check{{
				Name: "node-b denied by redis-masters", Want: "denied by redis-masters",
				Got: "denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)",
			}},
		},
		{
			name:   "expected resolvable by preemption, but not",
			expect: "    denied: [{node: node-c, resolvable: true}]\n",
			want: []Check{{
				Name: "node-c denied", Want: "denied (failed: preemption may help)",
				Got: "denied by elasticsearch-data (peer search/logs-elasticsearch-data-1) (unresolvable)",
			}},
		},
		{
			name:   "a misspelt node fails, it does not match nothing",
			expect: "    denied: [{node: node-x}]\n",
			want:   []Check{{Name: "node-x denied", Want: "node node-x in the snapshot", Got: "no such node"}},
		},
		{
			name:   "other nodes denied",
			expect: "    allowed: [node-a]\n    others: denied\n",
			want: []Check{
				{Name: "node-a allowed", Passed: true, Want: "allowed", Got: "allowed (score 0)"},
				{Name: "other nodes denied", Passed: true, Want: "every node not listed denied", Got: "so they are"},
			},
		},
		{
			name:   "other nodes expected allowed",
			expect: "    denied: [{node: node-b}]\n    others: allowed\n",
			want: []Check{
				{Name: "node-b denied", Passed: true, Want: "denied", Got: "denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)"},
				{
					Name: "other nodes allowed", Want: "every node not listed allowed",
					Got: "node-c denied by elasticsearch-data (peer search/logs-elasticsearch-data-1) (unresolvable)",
				},
			},
		},
		{
			name:   "a score order over a denied node fails",
			expect: "    scoreOrder: [node-a, node-b]\n",
			want: []Check{{
				Name: "score order", Want: "node-a > node-b",
				Got: "node-a=0; node-b denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)",
			}},
		},
		{
			name:   "peer keys and protection",
			expect: "    peerKeys: [elasticsearch/search/logs, bitnami-elasticsearch/search/logs]\n    unprotected: []\n",
			want: []Check{
				{Name: "peer keys", Passed: true, Want: "[bitnami-elasticsearch/search/logs, elasticsearch/search/logs]", Got: "[bitnami-elasticsearch/search/logs, elasticsearch/search/logs]"},
				{Name: "unprotected", Passed: true, Want: "protected", Got: "protected"},
			},
		},
		{
			name:   "expected unprotected, but protected",
			expect: "    unprotected: [role_unknown]\n",
			want:   []Check{{Name: "unprotected", Want: "[role_unknown]", Got: "protected"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeSuite(t, t.TempDir(), "s", dataPod+tt.expect)
			r := run(t, path)
			if diff := cmp.Diff(tt.want, checks(t, r)); diff != "" {
				t.Errorf("checks mismatch (-want +got):\n%s", diff)
			}
			failed := 0
			for _, c := range tt.want {
				if !c.Passed {
					failed++
				}
			}
			if r.Failed != failed || r.OK() != (failed == 0) {
				t.Errorf("report counts %d failed, OK() = %v; want %d failed", r.Failed, r.OK(), failed)
			}
		})
	}
}

// TestScoreOrder: the soft rules' order among the nodes a Redis replica
// may take. The manifest is another replica of cache: the master is on
// node-a (denied, on the node and in its zone), the replicas of the cluster
// on node-b and node-c spread it equally, and node-d, inline beside the
// snapshot, holds none.
func TestScoreOrder(t *testing.T) {
	const replica = `objects:
- apiVersion: v1
  kind: Node
  metadata:
    name: node-d
    labels: {kubernetes.io/hostname: node-d, topology.kubernetes.io/zone: eu-west-1d}
cases:
- name: c
  object:
    apiVersion: v1
    kind: Pod
    metadata:
      name: cache-redis-replicas-9
      namespace: shop
      labels:
        app.kubernetes.io/name: redis
        app.kubernetes.io/instance: cache
        app.kubernetes.io/component: replica
  expect:
`
	tests := []struct {
		name   string
		expect string
		want   Check
	}{
		{
			name:   "a best node, then ties",
			expect: "    scoreOrder: [node-d, [node-b, node-c]]\n",
			want:   Check{Name: "score order", Passed: true, Want: "node-d > node-b = node-c", Got: "node-d=10; node-b=0, node-c=0"},
		},
		{
			name:   "a strict order where the scores tie",
			expect: "    scoreOrder: [node-b, node-c]\n",
			want:   Check{Name: "score order", Want: "node-b > node-c", Got: "node-b=0; node-c=0"},
		},
		{
			name:   "the order reversed",
			expect: "    scoreOrder: [node-b, node-d]\n",
			want:   Check{Name: "score order", Want: "node-b > node-d", Got: "node-b=0; node-d=10"},
		},
		{
			name:   "a denied node in the order",
			expect: "    scoreOrder: [node-a, [node-b, node-c]]\n",
			want: Check{
				Name: "score order", Want: "node-a > node-b = node-c",
				Got: "node-a denied by redis-master-replica (peer shop/cache-redis-master-0), " +
					"redis-master-replica-zones (peer shop/cache-redis-master-0) (unresolvable); node-b=0, node-c=0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, writeSuite(t, t.TempDir(), "s", replica+tt.expect))
			if diff := cmp.Diff([]Check{tt.want}, checks(t, r)); diff != "" {
				t.Errorf("checks mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAudit: the violations of a snapshot, exactly, and the protection of
// named pods. In violating.yaml a replica of cache is on its master's node,
// node-a, and so in its zone, eu-west-1a: two violations of one pair.
func TestAudit(t *testing.T) {
	violating, err := filepath.Abs("../../../testdata/snapshots/violating.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const violation = "{rule: redis-master-replica, node: node-a, pods: [shop/cache-redis-replicas-0, shop/cache-redis-master-0]}"
	const zoneViolation = "{rule: redis-master-replica-zones, node: node-a, pods: [shop/cache-redis-master-0, shop/cache-redis-replicas-0]}"
	tests := []struct {
		name     string
		snapshot string
		audit    string
		want     []Check
	}{
		{
			name:     "the violations found, and no other",
			snapshot: violating,
			audit:    "  violations: [" + violation + ", " + zoneViolation + "]\n",
			want: []Check{
				{Name: "violation redis-master-replica on node-a between shop/cache-redis-master-0 and shop/cache-redis-replicas-0", Passed: true, Want: "found", Got: "found"},
				{Name: "violation redis-master-replica-zones on node-a between shop/cache-redis-master-0 and shop/cache-redis-replicas-0", Passed: true, Want: "found", Got: "found"},
				{Name: "no other violation", Passed: true, Want: "none", Got: "none"},
			},
		},
		{
			name:     "a violation not expected",
			snapshot: violating,
			audit:    "  violations: [" + violation + "]\n",
			want: []Check{
				{Name: "violation redis-master-replica on node-a between shop/cache-redis-master-0 and shop/cache-redis-replicas-0", Passed: true, Want: "found", Got: "found"},
				{
					Name: "no other violation", Want: "none",
					Got: "redis-master-replica-zones on node-a between shop/cache-redis-master-0 and shop/cache-redis-replicas-0",
				},
			},
		},
		{
			name:     "none expected",
			snapshot: violating,
			audit:    "  violations: []\n",
			want: []Check{{
				Name: "no other violation", Want: "none",
				Got: "redis-master-replica on node-a between shop/cache-redis-master-0 and shop/cache-redis-replicas-0; " +
					"redis-master-replica-zones on node-a between shop/cache-redis-master-0 and shop/cache-redis-replicas-0",
			}},
		},
		{
			name:     "a violation expected, none found",
			snapshot: clusterSnapshot,
			audit:    "  violations: [" + violation + "]\n",
			want: []Check{
				{
					Name: "violation redis-master-replica on node-a between shop/cache-redis-master-0 and shop/cache-redis-replicas-0",
					Want: "found", Got: "not found; the audit found none",
				},
				{Name: "no other violation", Passed: true, Want: "none", Got: "none"},
			},
		},
		{
			name:     "protection of named pods",
			snapshot: clusterSnapshot,
			audit:    "  unprotected:\n  - {pod: shop/cache-redis-master-0, reasons: []}\n  - {pod: kube-system/nothing, reasons: [no_workload]}\n",
			want:     nil, // the second pod is not in the snapshot: an error
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s.yaml")
			body := "apiVersion: regosched.io/v1alpha1\nkind: Suite\nsnapshot: " + tt.snapshot + "\naudit:\n" + tt.audit
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			r := run(t, path)
			c := r.Suites[0].Cases[0]
			if c.Name != AuditCase {
				t.Fatalf("case %q, want %q", c.Name, AuditCase)
			}
			if tt.want == nil {
				if c.Error == "" || r.Errors != 1 {
					t.Fatalf("want an error for a pod not in the snapshot, got %+v", c)
				}
				return
			}
			if diff := cmp.Diff(tt.want, c.Checks); diff != "" {
				t.Errorf("checks mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCannotRun: what keeps a suite or a case from running is an error of
// its own, and the other cases still run.
func TestCannotRun(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	if err := os.WriteFile(missing, []byte("apiVersion: regosched.io/v1alpha1\nkind: Suite\nsnapshot: nowhere.yaml\ncases:\n- {name: c, pod: a/b, expect: {others: allowed}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pods := writeSuite(t, dir, "pods", `cases:
- {name: no such pod, pod: search/nothing, expect: {others: allowed}}
- {name: runs, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-a]}}
`)
	r := run(t, missing, pods)
	if r.Errors != 2 || r.Passed != 1 || r.OK() {
		t.Errorf("errors %d, passed %d, OK %v; want 2 errors (the snapshot, the pod), 1 passed", r.Errors, r.Passed, r.OK())
	}
	if got := r.Suites[0].Error; !strings.Contains(got, "nowhere.yaml") {
		t.Errorf("suite error %q does not name the snapshot", got)
	}
	if got := r.Suites[1].Cases[0].Error; got != "pod search/nothing is not in the snapshot" {
		t.Errorf("case error %q", got)
	}
}

// TestParseErrors: a suite that would check nothing, or not what its
// author meant, is refused with the reason.
func TestParseErrors(t *testing.T) {
	const head = "apiVersion: regosched.io/v1alpha1\nkind: Suite\nsnapshot: x.yaml\n"
	tests := []struct {
		name, body, want string
	}{
		{"a misspelt expectation", head + "cases:\n- {name: c, pod: a/b, expect: {allowd: [nx]}}\n", `unknown field "allowd"`},
		{"no cluster", "apiVersion: regosched.io/v1alpha1\nkind: Suite\ncases:\n- {name: c, pod: a/b, expect: {others: allowed}}\n", "no snapshot and no objects"},
		{"nothing expected", head, "no cases and no audit"},
		{"a case expecting nothing", head + "cases:\n- {name: c, pod: a/b, expect: {}}\n", `case "c": expect: nothing`},
		{"pod and object", head + "cases:\n- {name: c, pod: a/b, object: {kind: Pod}, expect: {others: allowed}}\n", "give pod (a pod of the snapshot) or object"},
		{"no pod", head + "cases:\n- {name: c, expect: {others: allowed}}\n", "give pod (a pod of the snapshot) or object"},
		{"a case without a name", head + "cases:\n- {pod: a/b, expect: {others: allowed}}\n", "cases[0]: no name"},
		{"two cases of one name", head + "cases:\n- {name: c, pod: a/b, expect: {others: allowed}}\n- {name: c, pod: a/c, expect: {others: allowed}}\n", `case "c": named twice`},
		{"a bad verdict for others", head + "cases:\n- {name: c, pod: a/b, expect: {others: maybe}}\n", `expect.others "maybe"`},
		{"a peer without a rule", head + "cases:\n- {name: c, pod: a/b, expect: {denied: [{node: nx, peer: a/c}]}}\n", "a peer without its rule"},
		{"allowed and denied", head + "cases:\n- {name: c, pod: a/b, expect: {allowed: [nx], denied: [{node: nx}]}}\n", "node nx both allowed and denied"},
		{"a denied node ranked", head + "cases:\n- {name: c, pod: a/b, expect: {denied: [{node: nx}], scoreOrder: [nx, my]}}\n", "node nx is expected denied, and a denied node has no score"},
		{"an empty rank", head + "cases:\n- {name: c, pod: a/b, expect: {scoreOrder: [[]]}}\n", "lists no node"},
		{"a violation of one pod", head + "audit:\n  violations: [{rule: r, node: nx, pods: [a/b]}]\n", "want rule, node and two pods"},
		{"another kind", "apiVersion: v1\nkind: Pod\n", `kind "Pod": want regosched.io/v1alpha1, Suite`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadFile() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestDiscover: a directory's suites are found among its other YAML
// files, in order; a directory without one is an error.
func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	writeSuite(t, dir, "b", "audit: {violations: []}\n")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeSuite(t, filepath.Join(dir, "sub"), "a", "audit: {violations: []}\n")
	snap, err := os.ReadFile(clusterSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), snap, 0o600); err != nil {
		t.Fatal(err)
	}
	suites, err := Discover([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range suites {
		names = append(names, s.Name())
	}
	if diff := cmp.Diff([]string{"b", "a"}, names); diff != "" {
		t.Errorf("suites mismatch (-want +got):\n%s", diff)
	}
	if _, err := Discover([]string{filepath.Dir(clusterSnapshot)}); err == nil || !strings.Contains(err.Error(), "no file of kind Suite") {
		t.Errorf("Discover(a directory of snapshots) error = %v, want no suite", err)
	}
	if _, err := Discover([]string{filepath.Join(dir, "cluster.yaml")}); err == nil {
		t.Error("Discover(a snapshot file named) = nil error, want one: a file given is a suite")
	}
}

// TestRun selects cases with Options.Run.
func TestRunSelects(t *testing.T) {
	path := writeSuite(t, t.TempDir(), "s", `cases:
- {name: first, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-a]}}
- {name: second, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-b]}}
audit: {violations: []}
`)
	suites, err := Discover([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), suites, Options{Policy: defaultPolicy(t), Log: quietLog(), AllowOutsideSuite: true, Run: regexp.MustCompile("^s/(first|audit)$")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range r.Suites[0].Cases {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"first", "audit"}, names); diff != "" {
		t.Errorf("cases run mismatch (-want +got):\n%s", diff)
	}
	if !r.OK() {
		t.Errorf("the selected cases failed: %+v", r)
	}
}

// TestRenderJUnit: the XML parses, counts cases, and a failure carries
// want and got.
func TestRenderJUnit(t *testing.T) {
	path := writeSuite(t, t.TempDir(), "s", `cases:
- {name: passes, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-a]}}
- {name: fails, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-b]}}
- {name: cannot run, pod: search/none, expect: {allowed: [node-b]}}
`)
	var b bytes.Buffer
	if err := Render(&b, run(t, path), JUnit); err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JUnit output does not parse: %v\n%s", err, b.String())
	}
	if got.Tests != 3 || got.Failures != 1 || got.Errors != 1 || len(got.Suites) != 1 {
		t.Fatalf("tests %d, failures %d, errors %d, suites %d; want 3, 1, 1, 1", got.Tests, got.Failures, got.Errors, len(got.Suites))
	}
	fails := got.Suites[0].Cases[1].Failure
	if fails == nil || !strings.Contains(fails.Text, "want: allowed") || !strings.Contains(fails.Text, "got:  denied by elasticsearch-data") {
		t.Errorf("failure %+v does not say want and got", fails)
	}
}

// TestRenderTable: a failure is shown with want and got, under the table.
func TestRenderTable(t *testing.T) {
	path := writeSuite(t, t.TempDir(), "s", "cases:\n- {name: fails, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-b]}}\n")
	var b bytes.Buffer
	if err := Render(&b, run(t, path), Table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"s      fails  search/logs-elasticsearch-data-2  FAIL (1 of 1 checks)",
		"FAIL s/fails: node-b allowed\n  want: allowed\n  got:  denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)\n",
		"0 checks passed, 1 failed, 0 could not run.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestZoneRules: a hard rule per zone (redis-master-replica-zones), as verify
// reports it, on clusters given inline: it refuses every node of the peer's
// zone, is resolvable by preemption only on the peer's own node, and refuses
// nothing where the nodes make up one zone or the peer's node has no zone.
func TestZoneRules(t *testing.T) {
	node := func(name, zone string) string {
		labels := "{kubernetes.io/hostname: " + name
		if zone != "" {
			labels += ", topology.kubernetes.io/zone: " + zone
		}
		return "- {apiVersion: v1, kind: Node, metadata: {name: " + name + ", labels: " + labels + "}}}\n"
	}
	// pod is a member of Redis cache in shop: bound to node when given.
	pod := func(name, component, node string, priority int) string {
		spec := "containers: [{name: redis, image: redis}], priority: " + strconv.Itoa(priority)
		if node != "" {
			spec += ", nodeName: " + node
		}
		return "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: " + name + "\n    namespace: shop\n    uid: uid-" + name +
			"\n    labels: {app.kubernetes.io/name: redis, app.kubernetes.io/instance: cache, app.kubernetes.io/component: " + component + "}\n" +
			"  spec: {" + spec + "}\n"
	}
	tests := []struct {
		name    string
		objects string
		pending string
		expect  string
	}{
		{
			name:    "every node of the peer's zone, resolvable on the peer's node only",
			objects: node("n-a1", "zone-a") + node("n-a2", "zone-a") + node("n-b", "zone-b") + pod("cache-redis-replicas-0", "replica", "n-a1", 0),
			pending: "cache-redis-master-1",
			expect: "    denied:\n" +
				"    - {node: n-a1, rule: redis-master-replica-zones, peer: shop/cache-redis-replicas-0, resolvable: true}\n" +
				"    - {node: n-a2, rule: redis-master-replica-zones, peer: shop/cache-redis-replicas-0, resolvable: false}\n" +
				"    allowed: [n-b]\n",
		},
		{
			name:    "nodes of one zone: no zone refused",
			objects: node("n-a1", "zone-a") + node("n-a2", "zone-a") + pod("cache-redis-replicas-0", "replica", "n-a1", 0),
			pending: "cache-redis-master-1",
			expect:  "    denied: [{node: n-a1, rule: redis-master-replica, peer: shop/cache-redis-replicas-0}]\n    allowed: [n-a2]\n",
		},
		{
			name:    "the peer's node in no zone",
			objects: node("n-a1", "zone-a") + node("n-b", "zone-b") + node("n-x", "") + pod("cache-redis-replicas-0", "replica", "n-x", 0),
			pending: "cache-redis-master-1",
			expect:  "    denied: [{node: n-x, rule: redis-master-replica, peer: shop/cache-redis-replicas-0}]\n    others: allowed\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects := tt.objects + pod(tt.pending, "master", "", 1000)
			body := "apiVersion: regosched.io/v1alpha1\nkind: Suite\nmetadata: {name: s}\nobjects:\n" + objects +
				"cases:\n- name: c\n  pod: shop/" + tt.pending + "\n  expect:\n" + tt.expect
			path := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, c := range checks(t, run(t, path)) {
				if !c.Passed {
					t.Errorf("%s: want %s, got %s", c.Name, c.Want, c.Got)
				}
			}
		})
	}
}

// manifest is obj as a suite's inline object or a snapshot's item: JSON,
// which YAML reads too, with the apiVersion and kind the loader wants.
func manifest(t *testing.T, obj runtime.Object, apiVersion, kind string) string {
	t.Helper()
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// TestQuorumSizeFromStatefulSet: the size of a quorum's group is its
// StatefulSet's replicas, given inline or in the snapshot file. Of a
// StatefulSet of three Elasticsearch masters, one bound in zone-a, a
// second is refused every node of zone-a (a zone may hold one); counted
// from its members alone, two, the quorum's limit is 0 and it refuses
// nothing.
func TestQuorumSizeFromStatefulSet(t *testing.T) {
	const ns = "search"
	master := func(name, node string) *corev1.Pod {
		return fixture.MakePod().Namespace(ns).Name(name).Elasticsearch("es", "master").
			StatefulSet("es-master", "uid-es-master").Container(corev1.Container{Name: "es", Image: fixture.PauseImage}).Node(node).Obj()
	}
	objects := []string{
		manifest(t, fixture.MakeNode().Name("n-a1").Hostname().Zone("zone-a").Obj(), "v1", "Node"),
		manifest(t, fixture.MakeNode().Name("n-a2").Hostname().Zone("zone-a").Obj(), "v1", "Node"),
		manifest(t, fixture.MakeNode().Name("n-b").Hostname().Zone("zone-b").Obj(), "v1", "Node"),
		manifest(t, fixture.MakeNode().Name("n-c").Hostname().Zone("zone-c").Obj(), "v1", "Node"),
		manifest(t, master("es-master-0", "n-a1"), "v1", "Pod"),
		manifest(t, master("es-master-1", ""), "v1", "Pod"),
	}
	set := func(replicas int32) string {
		return manifest(t, fixture.StatefulSet(ns, "es-master", replicas, fixture.ElasticsearchLabels("es", "master")), "apps/v1", "StatefulSet")
	}
	const quorum = "elasticsearch-master-quorum"
	refusedInZoneA := []Check{
		{Name: "n-b allowed", Passed: true},
		{Name: "n-c allowed", Passed: true},
		{Name: "n-a1 denied by " + quorum, Passed: true},
		{Name: "n-a2 denied by " + quorum, Passed: true},
	}
	allowedEverywhere := []Check{
		{Name: "n-b allowed", Passed: true},
		{Name: "n-c allowed", Passed: true},
		{Name: "n-a1 denied by " + quorum},
		{Name: "n-a2 denied by " + quorum},
	}
	for _, tt := range []struct {
		name string
		// inline and file are StatefulSets of the suite's objects and of
		// its snapshot file.
		inline, file []string
		want         []Check
	}{
		{name: "a StatefulSet of three inline: refused in zone-a", inline: []string{set(3)}, want: refusedInZoneA},
		{name: "a StatefulSet of three in the snapshot file: refused in zone-a", file: []string{set(3)}, want: refusedInZoneA},
		{name: "a StatefulSet of two: a quorum of two refuses nothing", inline: []string{set(2)}, want: allowedEverywhere},
		{name: "no StatefulSet: two members counted refuse nothing", want: allowedEverywhere},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			body := "apiVersion: regosched.io/v1alpha1\nkind: Suite\nmetadata: {name: s}\n"
			if len(tt.file) > 0 {
				snap := filepath.Join(dir, "cluster.yaml")
				if err := os.WriteFile(snap, []byte(strings.Join(tt.file, "\n---\n")), 0o600); err != nil {
					t.Fatal(err)
				}
				body += "snapshot: cluster.yaml\n"
			}
			body += "objects:\n- " + strings.Join(append(slices.Clone(objects), tt.inline...), "\n- ") + "\n" +
				"cases:\n- name: c\n  pod: " + ns + "/es-master-1\n  expect:\n" +
				"    denied:\n" +
				"    - {node: n-a1, rule: " + quorum + ", peer: " + ns + "/es-master-0}\n" +
				"    - {node: n-a2, rule: " + quorum + ", peer: " + ns + "/es-master-0, resolvable: false}\n" +
				"    allowed: [n-b, n-c]\n"
			path := filepath.Join(dir, "s.yaml")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			var got []Check
			for _, c := range checks(t, run(t, path)) {
				got = append(got, Check{Name: c.Name, Passed: c.Passed})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("checks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatefulSetTwice: a StatefulSet inline that the snapshot file holds
// already is refused, as a node or a pod is, rather than one replacing
// the other.
func TestStatefulSetTwice(t *testing.T) {
	dir := t.TempDir()
	set := manifest(t, fixture.StatefulSet("search", "es-master", 3, fixture.ElasticsearchLabels("es", "master")), "apps/v1", "StatefulSet")
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(set), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.yaml")
	body := "apiVersion: regosched.io/v1alpha1\nkind: Suite\nsnapshot: cluster.yaml\nobjects:\n- " + set + "\naudit: {violations: []}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, path)
	want := "objects: StatefulSet search/es-master is in the snapshot already"
	if diff := cmp.Diff(want, r.Suites[0].Error); diff != "" {
		t.Errorf("suite error (-want +got):\n%s", diff)
	}
}
