package policy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/placement"
)

// TestJoinMatchesRego: what Go joins from claims is what
// data.regosched.join (the Rego that policy authors test with) answers for
// the same input, for the default policy.
func TestJoinMatchesRego(t *testing.T) {
	ctx := context.Background()
	p := mustDefaultPolicy(t)
	b, err := LoadFS(regosched.DefaultPolicy(), "default")
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]*ast.Module{}
	for _, m := range b.Modules {
		modules[m.Path] = m.Parsed
	}
	compiler := ast.NewCompiler()
	if compiler.Compile(modules); compiler.Failed() {
		t.Fatal(compiler.Errors)
	}
	store := inmem.NewFromObjectWithOpts(b.Data, inmem.OptReturnASTValuesOnRead(true))
	join, err := prepare(ctx, compiler, store, ast.MustParseTerm("[data.regosched.join.conflicts, data.regosched.join.penalties]"))
	if err != nil {
		t.Fatal(err)
	}
	esCluster := &Input{
		Pod: pod("logs-data-3", "pending", "", es("data")),
		Peers: []*placement.Pod{
			pod("logs-data-0", "u0", "node-0", es("data")),
			pod("logs-data-1", "u1", "node-1", es("data")),
			pod("logs-master-0", "u2", "node-1", es("master")),
			pod("logs-data-2", "u3", "node-2", es("data")), // node without a zone
		},
		Nodes: map[string]map[string]string{"node-0": {zoneLabel: "a"}, "node-1": {zoneLabel: "b"}, "node-2": {}},
	}
	mixed := redisCluster()
	mixed.Peers = append(mixed.Peers,
		pod("cache-0-master", "pending", "node-9", redis("cache", "master", "0")), // itself
		pod("cache-9-master", "u9", "", redis("cache", "master", "9")),            // not bound
		inNamespace("ops", pod("cache-8-master", "u8", "node-8", redis("cache", "master", "0"))),
	)
	master := redisCluster()
	master.Pod = pod("cache-0-master-new", "pending", "", redis("cache", "master", "0"))
	for name, in := range map[string]*Input{"redis replica": redisCluster(), "redis master": master, "elasticsearch": esCluster, "ignored peers": mixed} {
		t.Run(name, func(t *testing.T) {
			v, err := eval(ctx, join, in.value(p))
			if err != nil {
				t.Fatal(err)
			}
			arr := v.(*ast.Array)
			wantC, err := decodeConflicts(nil, arr.Elem(0).Value)
			if err != nil {
				t.Fatal(err)
			}
			wantP, err := decodePenalties(nil, arr.Elem(1).Value)
			if err != nil {
				t.Fatal(err)
			}
			if len(wantC)+len(wantP) == 0 {
				t.Fatal("the Rego join finds nothing: the case tests nothing")
			}
			for mode, in := range map[string]*Input{"labels": in, "facts": withFacts(t, p, in)} {
				gotC, gotP, err := p.Judge(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				if diff := gocmp.Diff(canonicalConflicts(wantC), gotC); diff != "" {
					t.Errorf("%s: conflicts mismatch (-rego +go):\n%s", mode, diff)
				}
				if diff := gocmp.Diff(canonicalPenalties(wantP), gotP); diff != "" {
					t.Errorf("%s: penalties mismatch (-rego +go):\n%s", mode, diff)
				}
			}
		})
	}
}

func TestNewClaimsErrors(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{`[]`, "is not an object"},
		{`{"marks": ["a"]}`, "marks"},
		{`{"marks": {"a": 1}}`, "is not a string to a string"},
		{`{"separate": [{"mark": "a"}]}`, "needs a string mark and rule"},
		{`{"separate": ["a"]}`, "is not an object"},
		{`{"separate": {"mark": "a", "rule": "r"}}`, "neither a set nor an array"},
		{`{"spread": [{"mark": "a", "rule": "r"}]}`, "has no topology_key"},
		{`{"spread": [{"mark": "a", "rule": "r", "topology_key": "k", "weight": -1}]}`, "non-negative"},
		{`{"spread": [{"mark": "a", "rule": "r", "topology_key": "k", "weight": "2"}]}`, "non-negative"},
	} {
		t.Run(tt.value, func(t *testing.T) {
			_, err := newClaims(ast.MustParseTerm(tt.value).Value)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("newClaims(%s) error = %v, want one containing %q", tt.value, err, tt.want)
			}
		})
	}
	c, err := newClaims(ast.MustParseTerm(`{"marks": {"m": "w"}, "spread": {{"mark": "m", "rule": "r", "topology_key": "k"}}}`).Value)
	if err != nil || countMarks(c) != 1 || c.avoids == nil || len(c.avoids.spread) != 1 || c.avoids.spread[0].weight != 1 {
		t.Errorf("newClaims(valid) = %+v, %v; want one mark and one spread of weight 1", c, err)
	}
}

// TestCachedClaimsKeepMarksOnly: the cache's KeyFunc keeps what a peer
// needs; the pending pod's own entries are for the request only.
func TestCachedClaimsKeepMarksOnly(t *testing.T) {
	p := mustDefaultPolicy(t)
	master := pod("m", "u", "", redis("cache", "master", "0"))
	_, full, err := p.Describe(context.Background(), master)
	if err != nil {
		t.Fatal(err)
	}
	_, cached, err := Describer(func() *Policy { return p })(context.Background(), master)
	if err != nil {
		t.Fatal(err)
	}
	f, c := full.(*Facts), cached.(*Facts)
	if f.claims.avoids == nil || len(f.claims.avoids.separate) == 0 || len(f.claims.avoids.spread) == 0 {
		t.Fatalf("Describe() claims = %+v; want separate and spread entries", f.claims)
	}
	if c.claims.avoids != nil || c.claims.marks != f.claims.marks || !c.claims.marked || c.claims.avoiding || c.policy != p {
		t.Errorf("cached claims = %+v; want the %d marks alone", c.claims, countMarks(&f.claims))
	}
}

// BenchmarkJoin is Judge for a Redis replica whose six peers carry their
// claims, as in a request: the Go join alone.
func BenchmarkJoin(b *testing.B) {
	p := mustDefaultPolicy(b)
	in := withFacts(b, p, redisCluster())
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := p.Judge(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDescribeViews: the three views of a Redis master: all its
// claims, as a peer (marks: the placement cache, once per pod version), as
// the pending pod (separate and spread: once per request).
func BenchmarkDescribeViews(b *testing.B) {
	p := mustDefaultPolicy(b)
	master := pod("m", "u", "", redis("cache", "master", "0"))
	for _, v := range []struct {
		name     string
		describe func(context.Context, *placement.Pod) ([]string, any, error)
	}{{"all", p.Describe}, {"peer", p.DescribePeer}, {"pending", p.DescribePending}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, f, err := v.describe(context.Background(), master); err != nil || f == nil {
					b.Fatal(f, err)
				}
			}
		})
	}
}

// TestClaimsPartsUndefined: a policy whose claims is one object rule with
// no spread, and whose facts are undefined for the pods: each part is read
// on its own, so the join still applies separate.
func TestClaimsPartsUndefined(t *testing.T) {
	p := compileFS(t, fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""

facts := "known" if input.pod.labels.known == "yes"

claims := {
	"marks": {"web": "{pod} serves web"},
	"separate": [{"mark": "web", "rule": "one-web-per-node"}],
} if input.pod.labels.app == "web"
`)},
	})
	web := map[string]string{"app": "web"}
	in := &Input{
		Pod:   pod("web-new", "pending", "", web),
		Peers: []*placement.Pod{pod("web-0", "u0", "node-0", web), pod("db-0", "u1", "node-1", map[string]string{"app": "db"})},
	}
	want := []Conflict{{Node: "node-0", Rule: "one-web-per-node", Reason: "shop/web-0 serves web", Peer: "u0"}}
	for mode, in := range map[string]*Input{"labels": in, "described": withFacts(t, p, in)} {
		t.Run(mode, func(t *testing.T) {
			got, pens, err := p.Judge(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("Judge() conflicts mismatch (-want +got):\n%s", diff)
			}
			if len(pens) != 0 {
				t.Errorf("Judge() penalties = %v, want none (no spread)", pens)
			}
		})
	}
	// Described, the pod keeps its claims though facts are undefined for it.
	if f, ok := withFacts(t, p, in).Peers[0].Facts.(*Facts); !ok || f.packed != "" || !f.claims.marked || countMarks(&f.claims) != 1 {
		t.Errorf("described peer facts = %+v, want claims with one mark and no packed facts", f)
	}
}

// countMarks counts the marks of c.
func countMarks(c *claims) int {
	n := 0
	c.eachMark(func(string, string) bool { n++; return true })
	return n
}

// defaultMarks are the marks the default policy gives a Redis master.
var defaultMarks = map[string]string{
	"redis/ns/cluster-0/cluster/cluster-0/*":      "redis: master {pod} of cluster cluster-0 already on this node",
	"redis/ns/cluster-0/cluster/cluster-0/master": "redis: master {pod} of cluster cluster-0 already on this node",
	"redis/ns/cluster-0/shard/0/*":                "redis: master {pod} of cluster cluster-0 (shard 0) already on this node",
	"redis/ns/cluster-0/shard/0/master":           "redis: master {pod} of cluster cluster-0 (shard 0) already on this node",
}

// claimsWithMarks reads claims whose marks are marks, as from a policy.
func claimsWithMarks(tb testing.TB, marks map[string]string) *claims {
	tb.Helper()
	obj := ast.NewObject()
	for token, what := range marks {
		obj.Insert(ast.StringTerm(token), ast.StringTerm(what))
	}
	c, err := newClaims(ast.NewObject([2]*ast.Term{ast.StringTerm("marks"), ast.NewTerm(obj)}))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// marksOf lists the marks of c as eachMark reads them.
func marksOf(c *claims) []mark {
	var out []mark
	c.eachMark(func(token, what string) bool { out = append(out, mark{token, what}); return true })
	return out
}

var allowMark = gocmp.AllowUnexported(mark{})

// TestPackedMarks: marks read back as written, in the order of their
// tokens, whatever their length; what finds exactly those; a truncated
// packing ends the marks early instead of panicking.
func TestPackedMarks(t *testing.T) {
	// The layout: "ab" is "a" and "b", with the description before it.
	layout := claimsWithMarks(t, map[string]string{"b": "y", "ab": "x", "a": "x"})
	if want := "\x00\x01a\x02x" + "\x01\x01b\x01" + "\x00\x01b\x02y"; layout.marks != want {
		t.Errorf("packed marks = %q, want %q", layout.marks, want)
	}
	long := strings.Repeat("x", 300) // two-byte lengths
	for _, tt := range []struct {
		name  string
		marks map[string]string
	}{
		{"none", map[string]string{}},
		{"empty token and description", map[string]string{"": "", "a": "", "b": "{pod} is b"}},
		{"default policy", defaultMarks},
		{"descriptions repeated only when consecutive", map[string]string{"a/1": "one", "a/2": "two", "a/3": "one", "b": "one"}},
		{"tokens prefixes of others", map[string]string{"a": "x", "ab": "x", "abc": "y", "abd": "y", "b": "y"}},
		{"tokens ends of others", map[string]string{"ab": "x", "b": "x", "bb": "y"}},
		{"two-byte lengths", map[string]string{long: long, long + "y": long, long + "z": "z", "y": long}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := claimsWithMarks(t, tt.marks)
			var want []mark
			for token, what := range tt.marks {
				want = append(want, mark{token, what})
			}
			slices.SortFunc(want, func(a, b mark) int { return strings.Compare(a.token, b.token) })
			if diff := gocmp.Diff(want, marksOf(c), allowMark); diff != "" {
				t.Errorf("marks mismatch (-want +got):\n%s", diff)
			}
			// Every token, and strings about them: their prefixes, those
			// followed by bytes that sort before, among and after, and two
			// tokens end to end.
			var queries []string
			for token := range tt.marks {
				for i := range len(token) + 1 {
					queries = append(queries, token[:i], token[:i]+"\x00", token[:i]+"m", token[:i]+"\xff")
				}
				for other := range tt.marks {
					queries = append(queries, token+other)
				}
			}
			for _, q := range queries {
				wantWhat, wantOK := tt.marks[q]
				if what, ok := c.what(q); what != wantWhat || ok != wantOK {
					t.Errorf("what(%q) = %q, %v; want %q, %v", q, what, ok, wantWhat, wantOK)
				}
			}
			for i := range len(c.marks) {
				cut := &claims{marks: c.marks[:i]}
				got := marksOf(cut)
				if len(got) >= len(want) || !slices.Equal(want[:len(got)], got) {
					t.Errorf("%d of %d bytes read as %d marks, want fewer, the first of %d", i, len(c.marks), len(got), len(want))
				}
				for _, m := range want {
					if what, ok := cut.what(m.token); ok && what != m.what {
						t.Errorf("%d of %d bytes: what(%q) = %q, want %q or nothing", i, len(c.marks), m.token, what, m.what)
					}
				}
			}
		})
	}
}

// TestCorruptMarks: a packing Go did not write reads as the marks before
// the first entry that makes no sense.
func TestCorruptMarks(t *testing.T) {
	const a = "\x00\x01a\x02x" // token "a", description "x"
	for _, tt := range []struct {
		name, marks string
		want        []mark
	}{
		{"shared longer than the previous token", a + "\x02\x01b\x01", []mark{{"a", "x"}}},
		{"shared in the first entry", "\x01\x01a\x02x", nil},
		{"repeat in the first entry", "\x00\x01a\x01", nil},
		{"odd description field but repeat", a + "\x01\x01b\x03", []mark{{"a", "x"}}},
		{"suffix past the end", "\x00\x05a\x02x", nil},
		{"description past the end", "\x00\x01a\x04x", nil},
		{"huge shared", a + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x01", []mark{{"a", "x"}}},
		{"huge description length", "\x00\x01a\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01x", nil},
		{"varint of eleven bytes", strings.Repeat("\x80", 10) + "\x00", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &claims{marks: tt.marks}
			if diff := gocmp.Diff(tt.want, marksOf(c), allowMark); diff != "" {
				t.Errorf("marks mismatch (-want +got):\n%s", diff)
			}
			for _, q := range []string{"", "a", "b"} {
				what, ok := c.what(q)
				want := slices.IndexFunc(tt.want, func(m mark) bool { return m.token == q })
				if ok != (want >= 0) || ok && what != tt.want[want].what {
					t.Errorf("what(%q) = %q, %v; want it found only among %v", q, what, ok, tt.want)
				}
			}
		})
	}
}

// TestWhatDoesNotAllocate: the join calls what for every peer and entry, so it
// must not allocate.
func TestWhatDoesNotAllocate(t *testing.T) {
	c := claimsWithMarks(t, defaultMarks)
	for _, token := range []string{"redis/ns/cluster-0/shard/0/master", "redis/ns/cluster-0/shard/0/replica"} {
		wantWhat, wantOK := defaultMarks[token]
		var what string
		var ok bool
		if n := testing.AllocsPerRun(100, func() { what, ok = c.what(token) }); n != 0 {
			t.Errorf("what(%q) allocates %v times, want 0", token, n)
		}
		if what != wantWhat || ok != wantOK {
			t.Errorf("what(%q) = %q, %v; want %q, %v", token, what, ok, wantWhat, wantOK)
		}
	}
}
