package policy

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// malformed gives a pod labelled bad=<name> the claims of that name, and
// one without the label a valid separate; the sample pod of Compile's
// smoke test is in no group, so the bundle compiles.
const malformed = `package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""

peer_keys contains 7 if input.pod.labels.bad == "key"

claims := {"separate": [{"mark": "m", "rule": "r"}]} if not input.pod.labels.bad

claims := {"marks": "not an object"} if input.pod.labels.bad == "marks"

claims := {"marks": {"m": 1}} if input.pod.labels.bad == "mark"

claims := {"marks": {1: "x"}} if input.pod.labels.bad == "token"

claims := {"separate": [{"mark": "m"}]} if input.pod.labels.bad == "separate"

claims := {"separate": ["m"]} if input.pod.labels.bad == "entry"

claims := {"separate": {"mark": "m", "rule": "r"}} if input.pod.labels.bad == "object"

claims := {"spread": [{"mark": "m", "rule": "r"}]} if input.pod.labels.bad == "spread"

claims := {"spread": [{"mark": "m", "rule": "r", "topology_key": "k", "weight": -1}]} if input.pod.labels.bad == "negative"

claims := {"spread": {{"mark": "m", "rule": "r", "topology_key": "k", "weight": "2"}}} if input.pod.labels.bad == "weight"
`

// TestMalformedResults: results that pass Compile's smoke test but are
// malformed for a real pod are errors, not silently dropped, wherever the
// pod is described.
func TestMalformedResults(t *testing.T) {
	p := compileFS(t, fstest.MapFS{"regosched/p.rego": {Data: []byte(malformed)}})
	ctx := context.Background()
	ok := map[string]string{"app": "a"}
	bad := func(what string, node string) *model.Pod {
		return fixture.MakePod().Namespace("shop").Name("p").UID("u-" + node).Labels(map[string]string{"app": "a", "bad": what}).Node(node).Model()
	}
	// Each way a pod is described: marks are read from a peer, separate
	// and spread from the pending pod.
	describe := map[string]func(what string) error{
		"PeerKeys": func(what string) error { _, err := p.PeerKeys(ctx, bad(what, "")); return err },
		"Describe": func(what string) error { _, _, err := p.Describe(ctx, bad(what, "")); return err },
		"DescribePeer": func(what string) error {
			_, _, err := p.DescribePeer(ctx, bad(what, "node-0"))
			return err
		},
		"DescribePending": func(what string) error { _, _, err := p.DescribePending(ctx, bad(what, "")); return err },
		"Judge as peer": func(what string) error {
			_, _, err := p.Join(ctx,
				&Input{Pod: fixture.MakePod().Namespace("shop").Name("q").UID("q").Labels(ok).Model(), Peers: []*model.Pod{bad(what, "node-0")}},
			)
			return err
		},
		"Judge as pending": func(what string) error {
			_, _, err := p.Join(ctx,
				&Input{Pod: bad(what, ""), Peers: []*model.Pod{fixture.MakePod().Namespace("shop").Name("q").UID("q").Labels(ok).Node("node-0").Model()}},
			)
			return err
		},
	}
	all := []string{"PeerKeys", "Describe", "DescribePeer", "DescribePending", "Judge as peer", "Judge as pending"}
	asPeer := []string{"Describe", "DescribePeer", "Judge as peer"}
	asPending := []string{"Describe", "DescribePending", "Judge as pending"}
	tests := []struct {
		bad  string
		by   []string
		want string
	}{
		{"key", all, "data.regosched.peer_keys: key 7 is not a string"},
		{"marks", asPeer, `data.regosched.claims: marks "not an object" is not an object`},
		{"mark", asPeer, `data.regosched.claims: mark "m": 1 is not a string to a string`},
		{"token", asPeer, `data.regosched.claims: mark 1: "x" is not a string to a string`},
		{"separate", asPending, `data.regosched.claims separate: {"mark": "m"} needs a string mark and rule`},
		{"entry", asPending, `data.regosched.claims separate: "m" is not an object`},
		{"object", asPending, "is neither a set nor an array"},
		{"spread", asPending, `data.regosched.claims spread: {"mark": "m", "rule": "r"} has no topology_key`},
		{"negative", asPending, "data.regosched.claims spread: weight of"},
		{"weight", asPending, "is not a non-negative number"},
	}
	for _, tt := range tests {
		for _, by := range tt.by {
			t.Run(tt.bad+"/"+by, func(t *testing.T) {
				err := describe[by](tt.bad)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error = %v, want it to contain %q", err, tt.want)
				}
			})
		}
	}
	t.Run("peer named", func(t *testing.T) {
		err := describe["Judge as peer"]("marks")
		if want := "claims of peer shop/p: "; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to contain %q", err, want)
		}
	})
}

// TestCachedClaimsHeap bounds what the claims of one cached Redis pod cost
// (with the default policy: its marks as a peer): the placement cache keeps
// one per bound pod. Every pod is of a cluster of its own, so that nothing
// is shared between them (the worst case: clusters small and many).
func TestCachedClaimsHeap(t *testing.T) {
	p := mustDefaultPolicy(t)
	describe := Describer(func() *Policy { return p })
	const n = 2000
	pods := make([]*model.Pod, n)
	for i := range pods {
		pods[i] = fixture.MakePod().Namespace("shop").Name(fmt.Sprintf("cache-%d-0", i)).UID(fmt.Sprint(i)).Redis(fmt.Sprintf("cache-%d", i), "master", "0").Node("node-1").Model()
	}
	keep := make([]*model.Claims, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // and what sync.Pools keep one cycle more
	runtime.ReadMemStats(&before)
	for i := range keep {
		_, c, err := describe(context.Background(), pods[i])
		if err != nil || c == nil {
			t.Fatalf("Describer() = %v, %v; want claims", c, err)
		}
		keep[i] = c
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPod := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	runtime.KeepAlive(keep)
	runtime.KeepAlive(pods)
	t.Logf("claims of a Redis pod: %.0f bytes of heap (%d marks)", perPod, len(marksOf(keep[0])))
	if perPod > 350 {
		t.Errorf("claims of a Redis pod take %.0f bytes of heap, want at most 350", perPod)
	}
}
