package policy

import (
	"context"
	"testing"
	"testing/fstest"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// judged is what Judge answers, for one comparison.
type judged struct {
	Conflicts []model.Conflict
	Penalties []model.Penalty
}

// judgeBoth runs Judge on in as it comes and with every pod described, as
// in a request, and checks that Conflicts answers Judge's hard rules.
func judgeBoth(t *testing.T, p *Policy, in *Input, want judged) {
	t.Helper()
	for mode, in := range map[string]*Input{"labels": in, "described": described(t, p, in)} {
		t.Run(mode, func(t *testing.T) {
			cs, ps, err := p.Join(context.Background(), in)
			if err != nil {
				t.Fatalf("Judge() error = %v", err)
			}
			if diff := gocmp.Diff(want, judged{cs, ps}, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Judge() mismatch (-want +got):\n%s", diff)
			}
			cs, err = p.Conflicts(context.Background(), in)
			if err != nil {
				t.Fatalf("Conflicts() error = %v", err)
			}
			if diff := gocmp.Diff(want.Conflicts, cs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Conflicts() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJudgeUsesKeptClaims: the claims a pod carries are used when this
// policy described the part Judge needs, and described again otherwise (a
// pod kept under the previous policy, or for the other role).
func TestJudgeUsesKeptClaims(t *testing.T) {
	ctx := context.Background()
	p, other := compileFS(t, minimal()), compileFS(t, minimal())
	web, db := map[string]string{"app": "web"}, map[string]string{"app": "db"}
	// as is what view says of a pod labelled db: kept, it shows which
	// claims Judge used, since the pods are labelled web.
	as := func(view func(context.Context, *model.Pod) ([]string, *model.Claims, error)) *model.Claims {
		_, c, err := view(ctx, fixture.MakePod().Namespace("shop").Name("db").UID("db").Labels(db).Model())
		if err != nil || c == nil {
			t.Fatalf("describing a db pod: %v, %v", c, err)
		}
		return c
	}
	conflict := judged{
		Conflicts: []model.Conflict{{Node: "node-0", Domain: onNode("node-0"), Rule: "same-app", Reason: "shop/web-0 of the same app", Peer: "u0"}},
		Penalties: []model.Penalty{{TopologyKey: model.HostnameKey, Value: "node-0", Weight: 1, Rule: "spread", Peer: "u0"}},
	}
	tests := []struct {
		name         string
		mine, theirs *model.Claims
		want         judged
	}{
		{"none kept: described now", nil, nil, conflict},
		{"all parts kept serve both", as(p.Describe), nil, judged{}},
		{"the peer's marks kept by this policy", nil, as(p.DescribePeer), judged{}},
		{"the peer's marks kept by another policy", nil, as(other.DescribePeer), conflict},
		{"the peer kept without marks", nil, as(p.DescribePending), conflict},
		{"the pending pod's avoids kept by this policy", as(p.DescribePending), nil, judged{}},
		{"the pending pod's avoids kept by another policy", as(other.DescribePending), nil, conflict},
		{"the pending pod kept without avoids", as(p.DescribePeer), nil, conflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pending := fixture.MakePod().Namespace("shop").Name("web-new").UID("pending").Labels(web).Model()
			peer := fixture.MakePod().Namespace("shop").Name("web-0").UID("u0").Labels(web).Node("node-0").Model()
			pending.Claims, peer.Claims = tt.mine, tt.theirs
			cs, ps, err := p.Join(ctx, &Input{Pod: pending, Peers: []*model.Pod{peer}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tt.want, judged{cs, ps}, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Judge() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClaimsPartsUndefined: a policy whose claims is one object without
// spread, and undefined for some pods: each part is read on its own, so
// that the join still applies separate.
func TestClaimsPartsUndefined(t *testing.T) {
	p := compileFS(t, fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""

claims := {
	"marks": {"web": "{pod} serves web"},
	"separate": [{"mark": "web", "rule": "one-web-per-node"}],
} if input.pod.labels.app == "web"
`)},
	})
	web := map[string]string{"app": "web"}
	in := &Input{
		Pod: fixture.MakePod().Namespace("shop").Name("web-new").UID("pending").Labels(web).Model(),
		Peers: []*model.Pod{
			fixture.MakePod().Namespace("shop").Name("web-0").UID("u0").Labels(web).Node("node-0").Model(),
			fixture.MakePod().Namespace("shop").Name("db-0").UID("u1").Label("app", "db").Node("node-1").Model(),
		},
	}
	judgeBoth(t, p, in, judged{Conflicts: []model.Conflict{{Node: "node-0", Domain: onNode("node-0"), Rule: "one-web-per-node", Reason: "shop/web-0 serves web", Peer: "u0"}}})

	// A pod in a group whose claims are undefined has empty claims, not
	// none, so that the cache does not describe it again.
	_, c, err := p.DescribePeer(context.Background(), in.Peers[1])
	if err != nil || c == nil || !c.Has(model.MarksPart) || len(marksOf(c)) != 0 {
		t.Errorf("DescribePeer(db-0) = %v, %v; want claims with marks evaluated and none", marksOf(c), err)
	}
}

func TestNewInput(t *testing.T) {
	labels := map[string]map[string]string{"n1": {"zone": "a"}, "n2": {"zone": "b"}}
	lookup := fixture.Nodes(labels)
	pod := &model.Pod{Name: "p"}
	tests := []struct {
		name  string
		peers []*model.Pod
		want  map[string]map[string]string
	}{
		{name: "no peers", want: map[string]map[string]string{}},
		{name: "two peers on one node, one on another", peers: []*model.Pod{{Name: "a", Node: "n1"}, {Name: "b", Node: "n1"}, {Name: "c", Node: "n2"}},
			want: map[string]map[string]string{"n1": {"zone": "a"}, "n2": {"zone": "b"}}},
		{name: "a node the cache does not know is left out", peers: []*model.Pod{{Name: "a", Node: "gone"}},
			want: map[string]map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := NewInput(pod, tt.peers, lookup)
			if in.Pod != pod || len(in.Peers) != len(tt.peers) {
				t.Errorf("NewInput kept pod %v and %d peers, want %v and %d", in.Pod, len(in.Peers), pod, len(tt.peers))
			}
			if diff := gocmp.Diff(tt.want, in.Nodes); diff != "" {
				t.Errorf("Nodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSumByDomain(t *testing.T) {
	got := SumByDomain([]model.Penalty{
		{TopologyKey: model.HostnameKey, Value: "n1", Weight: 1},
		{TopologyKey: model.HostnameKey, Value: "n1", Weight: 1},
		{TopologyKey: model.HostnameKey, Value: "n2", Weight: 1},
		{TopologyKey: "topology.kubernetes.io/zone", Value: "zone-a", Weight: 2},
	})
	want := map[string]map[string]float64{
		model.HostnameKey:             {"n1": 2, "n2": 1},
		"topology.kubernetes.io/zone": {"zone-a": 2},
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("SumByDomain (-want +got):\n%s", diff)
	}
}

// BenchmarkJoin is Judge for a Redis replica whose six peers carry their
// claims, as in a request: the Go join alone.
func BenchmarkJoin(b *testing.B) {
	p := mustDefaultPolicy(b)
	in := described(b, p, redisCluster())
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := p.Join(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJudge keeps the names it had when pods carried facts: with
// facts=labels every pod is described during Judge, with facts=given
// they carry their claims.
func BenchmarkJudge(b *testing.B) {
	p := mustDefaultPolicy(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		in   *Input
	}{
		{"facts=labels", redisCluster()},
		{"facts=given", described(b, p, redisCluster())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := p.Join(ctx, bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
