package policy

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/placement"
)

func TestFactsRoundTrip(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"null", `null`},
		{"booleans", `[true, false]`},
		{"numbers keep their text", `[0, -1, 1.5, 1e400, 12345678901234567890]`},
		{"strings", `["", "redis", "ünï\u0000code", "` + strings.Repeat("x", 300) + `"]`},
		{"empty collections", `[[], set(), {}]`},
		{"sets stay sets", `{"roles": {"*", "master"}}`},
		{"default policy facts", `{"redis": {"kind": "redis", "cluster": "cache", "shard": "0", "roles": {"*", "master"}}}`},
		{"non-string keys", `{1: "a", [1, 2]: {"b"}, null: false}`},
		{"deep", `[[[[[[{"a": [[{"b": {{1}}}]]}]]]]]]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := ast.MustParseTerm(tt.value)
			f, err := newFacts(want.Value)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.term()
			if err != nil {
				t.Fatal(err)
			}
			// Compare is exact: an array where a set was, or 1.0 for 1, differs.
			if want.Value.Compare(got.Value) != 0 || want.String() != got.String() {
				t.Errorf("round trip of %s gave %s", want, got)
			}
			if got.Hash() != want.Hash() {
				t.Errorf("hash of %s changed in the round trip", want)
			}
		})
	}
}

func TestFactsErrors(t *testing.T) {
	if _, err := newFacts(ast.MustParseTerm(`{"a": x}`).Value); err == nil || !strings.Contains(err.Error(), "not a ground value") {
		t.Errorf("packFacts(non-ground) error = %v, want one saying it is not a ground value", err)
	}
	f, err := newFacts(ast.MustParseTerm(`{"redis": {"roles": {"*", "master"}, "n": 1}}`).Value)
	if err != nil {
		t.Fatal(err)
	}
	// Every proper prefix is an error, never a panic or a partial value.
	for i := range len(f.packed) {
		if _, err := (&Facts{packed: f.packed[:i]}).term(); err == nil {
			t.Errorf("unpacking %d of %d bytes gave no error", i, len(f.packed))
		}
	}
	for _, bad := range []string{f.packed + "n", "x", "a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", "o\x05sa"} {
		if _, err := (&Facts{packed: bad}).term(); err == nil {
			t.Errorf("unpacking %q gave no error", bad)
		}
	}
}

// TestFactsHeap bounds what the facts of one cached Redis pod cost (with
// the default policy: its claims as a peer, the marks): the placement cache
// keeps one per bound pod. Every pod is of a cluster of its own, so that
// nothing is shared between them (the worst case: clusters small and many).
func TestFactsHeap(t *testing.T) {
	p := mustDefaultPolicy(t)
	describe := Describer(func() *Policy { return p })
	const n = 10000
	pods := make([]*placement.Pod, n)
	for i := range pods {
		pods[i] = pod(fmt.Sprintf("cache-%d-0", i), fmt.Sprint(i), "node-1", redis(fmt.Sprintf("cache-%d", i), "master", "0"))
	}
	keep := make([]*Facts, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // and what sync.Pools keep one cycle more
	runtime.ReadMemStats(&before)
	for i := range keep {
		_, f, err := describe(context.Background(), pods[i])
		facts, ok := f.(*Facts)
		if err != nil || !ok {
			t.Fatalf("Describe() = %v, %v; want *Facts", f, err)
		}
		keep[i] = facts
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPod := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	runtime.KeepAlive(keep)
	runtime.KeepAlive(pods)
	t.Logf("facts of a Redis pod: %.0f bytes of heap (%d marks)", perPod, countMarks(&keep[0].claims))
	if perPod > 350 {
		t.Errorf("facts of a Redis pod take %.0f bytes of heap, want at most 350", perPod)
	}
}

// BenchmarkFactsTerm unpacks the facts of a Redis pod as a policy would
// describe them (the member facts of workloads.rego).
func BenchmarkFactsTerm(b *testing.B) {
	f, err := newFacts(ast.MustParseTerm(`{"redis": {"cluster": "cache", "kind": "redis", "roles": {"*", "master"}, "shard": "0"}}`).Value)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.term(); err != nil {
			b.Fatal(err)
		}
	}
}

// factsPolicy keys pods by app and remembers their tier; its conflicts echo
// the facts each input pod carries, "none" for a pod without.
func factsPolicy() fstest.MapFS {
	fsys := minimal()
	fsys["regosched/facts.rego"] = &fstest.MapFile{Data: []byte(`package regosched

facts := {"tier": input.pod.labels.tier, "seen": {input.pod.name}} if input.pod.labels.tier != "undefined"
`)}
	fsys["regosched/filter.rego"] = &fstest.MapFile{Data: []byte(`package regosched.filter

conflicts contains {"node": peer.node, "rule": json.marshal(object.get(input.pod, "facts", "none")), "reason": json.marshal(object.get(peer, "facts", "none")), "peer": peer.uid} if {
	some peer in input.peers
}
`)}
	return fsys
}

func TestDescribe(t *testing.T) {
	ctx := context.Background()
	p := compileFS(t, factsPolicy())
	pod := func(name string, labels map[string]string) *placement.Pod {
		return &placement.Pod{Namespace: "shop", Name: name, UID: types.UID(name), Labels: placement.NewLabels(labels), Node: "node-" + name}
	}
	describe := func(pol *Policy, x *placement.Pod) (*placement.Pod, []string) {
		t.Helper()
		keys, facts, err := pol.Describe(ctx, x)
		if err != nil {
			t.Fatalf("Describe(%s) error = %v", x.Name, err)
		}
		x.Facts = facts
		return x, keys
	}
	pending, keys := describe(p, pod("a", map[string]string{"app": "web", "tier": "front"}))
	if diff := gocmp.Diff([]string{"web"}, keys); diff != "" {
		t.Errorf("Describe() keys mismatch (-want +got):\n%s", diff)
	}
	described, _ := describe(p, pod("b", map[string]string{"app": "web", "tier": "back"}))
	undefined, keys := describe(p, pod("c", map[string]string{"app": "web", "tier": "undefined"}))
	if diff := gocmp.Diff([]string{"web"}, keys); diff != "" {
		t.Errorf("Describe() keys with undefined facts mismatch (-want +got):\n%s", diff)
	}
	ungrouped, _ := describe(p, pod("d", map[string]string{"tier": "back"}))
	other, _ := describe(compileFS(t, factsPolicy()), pod("e", map[string]string{"app": "web", "tier": "back"}))
	withoutRule, _ := describe(compileFS(t, minimal()), pod("f", map[string]string{"app": "web", "tier": "back"}))

	got, err := p.Conflicts(ctx, &Input{Pod: pending, Peers: []*placement.Pod{described, undefined, ungrouped, other, withoutRule}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Conflict{
		{Node: "node-b", Peer: "b", Reason: `{"seen":["b"],"tier":"back"}`},
		{Node: "node-c", Peer: "c", Reason: `"none"`}, // facts undefined for it
		{Node: "node-d", Peer: "d", Reason: `"none"`}, // in no group: nobody's peer, no facts kept
		{Node: "node-e", Peer: "e", Reason: `"none"`}, // computed by another policy
		{Node: "node-f", Peer: "f", Reason: `"none"`}, // by a policy without facts
	}
	for i := range want {
		want[i].Rule = `{"seen":["a"],"tier":"front"}`
	}
	if diff := gocmp.Diff(sortConflicts(want), sortConflicts(got)); diff != "" {
		t.Errorf("Conflicts() mismatch (-want +got):\n%s", diff)
	}
}

// newFacts packs v as Describe would.
func newFacts(v ast.Value) (*Facts, error) {
	packed, err := packFacts(v)
	if err != nil {
		return nil, err
	}
	return &Facts{packed: packed}, nil
}
