package policy

import (
	"context"
	"testing"
	"testing/fstest"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

func TestPeerKeysDefaultPolicy(t *testing.T) {
	p := mustDefaultPolicy(t)
	both := fixture.ElasticsearchLabels("logs", "data")
	both[eckCluster] = "logs-eck"
	tests := []struct {
		name string
		pod  *model.Pod
		want []string
	}{
		{"redis", fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("u0").Redis("cache", "master", "").Model(), []string{"redis/shop/cache"}},
		{"redis, other namespace", fixture.MakePod().Namespace("ops").Name("cache-0-master").UID("u0").Redis("cache", "master", "").Model(), []string{"redis/ops/cache"}},
		{"elasticsearch", fixture.MakePod().Namespace("shop").Name("logs-data-0").UID("u0").Elasticsearch("logs", "data").Model(), []string{"elasticsearch/shop/logs"}},
		{"eck", fixture.MakePod().Namespace("shop").Name("logs-es-data-0").UID("u0").Labels(eck("logs", "true")).Model(), []string{"elasticsearch-eck/shop/logs"}},
		{"two workload entries", fixture.MakePod().Namespace("shop").Name("logs-data-0").UID("u0").Labels(both).Model(), []string{"elasticsearch-eck/shop/logs-eck", "elasticsearch/shop/logs"}},
		{"bound pod", fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("u0").Redis("cache", "master", "").Node("node-1").Model(), []string{"redis/shop/cache"}},
		{"empty cluster label", fixture.MakePod().Namespace("shop").Name("cache-0").UID("u0").Redis("", "master", "").Model(), nil},
		{"unrelated labels", fixture.MakePod().Namespace("shop").Name("web-0").UID("u0").Labels(map[string]string{nameLabel: "web", instanceLabel: "web"}).Model(), nil},
		{"nil labels", fixture.MakePod().Namespace("shop").Name("bare").UID("u0").Model(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.PeerKeys(context.Background(), tt.pod)
			if err != nil {
				t.Fatalf("PeerKeys() error = %v", err)
			}
			if diff := gocmp.Diff(tt.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("PeerKeys() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodInput: the rules that look at one pod get {pod} in the documented
// shape, and nothing else, whichever entry point asks.
func TestPodInput(t *testing.T) {
	p := compileFS(t, fstest.MapFS{"regosched/echo.rego": {Data: []byte(`package regosched

peer_keys contains json.marshal(input)

claims := {"marks": {"input": json.marshal(input)}}
`)}})
	ctx := context.Background()
	tests := []struct {
		name string
		pod  *model.Pod
		want string
	}{
		{"pending pod", &model.Pod{Namespace: "shop", Name: "cache-0", UID: "u0", Labels: model.NewLabels(map[string]string{"app": "cache", "tier": ""}), Priority: -100},
			`{"pod":{"labels":{"app":"cache","tier":""},"name":"cache-0","namespace":"shop","node":"","priority":-100,"uid":"u0"}}`},
		{"bound pod without labels", &model.Pod{Namespace: "ops", Name: "cache-1", UID: "u1", Priority: 2000000000, Node: "node-1"},
			`{"pod":{"labels":{},"name":"cache-1","namespace":"ops","node":"node-1","priority":2000000000,"uid":"u1"}}`},
		{"empty pod", &model.Pod{},
			`{"pod":{"labels":{},"name":"","namespace":"","node":"","priority":0,"uid":""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := p.PeerKeys(ctx, tt.pod)
			if err != nil {
				t.Fatalf("PeerKeys() error = %v", err)
			}
			if diff := gocmp.Diff([]string{tt.want}, keys); diff != "" {
				t.Errorf("PeerKeys() mismatch (-want +got):\n%s", diff)
			}
			_, c, err := p.Describe(ctx, tt.pod)
			if err != nil {
				t.Fatalf("Describe() error = %v", err)
			}
			if diff := gocmp.Diff([]model.Mark{{Token: "input", What: tt.want}}, marksOf(c)); diff != "" {
				t.Errorf("Describe() marks mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// marksOf lists the marks of c as EachMark reads them; nil for nil claims.
func marksOf(c *model.Claims) []model.Mark {
	if c == nil {
		return nil
	}
	var out []model.Mark
	c.EachMark(func(token, what string) bool {
		out = append(out, model.Mark{Token: token, What: what})
		return true
	})
	return out
}

// view is what one view of a pod gives: its parts, as read back.
type view struct {
	Keys           []string
	Has            []model.Parts
	Marks          []model.Mark
	Separate       []model.Avoid
	Spread         []model.Avoid
	FromThisPolicy bool
	NoClaims       bool
}

func viewOf(p *Policy, keys []string, c *model.Claims) view {
	v := view{Keys: keys, NoClaims: c == nil}
	if c == nil {
		return v
	}
	for _, parts := range []model.Parts{model.MarksPart, model.AvoidsPart} {
		if c.Has(parts) {
			v.Has = append(v.Has, parts)
		}
	}
	v.Marks, v.Separate, v.Spread, v.FromThisPolicy = marksOf(c), c.Separate(), c.Spread(), c.Origin() == p.Origin()
	return v
}

// TestDescribeViews: each view of a pod evaluates only the parts of its
// claims that its reader needs, and says which.
func TestDescribeViews(t *testing.T) {
	p := mustDefaultPolicy(t)
	const cluster, shard = "redis: master {pod} of cluster cache already on this node", "redis: master {pod} of cluster cache (shard 0) already on this node"
	marks := []model.Mark{
		{Token: "redis/shop/cache/cluster/cache/*", What: cluster},
		{Token: "redis/shop/cache/cluster/cache/master", What: cluster},
		{Token: "redis/shop/cache/shard/0/*", What: shard},
		{Token: "redis/shop/cache/shard/0/master", What: shard},
	}
	separate := []model.Avoid{
		{Mark: "redis/shop/cache/cluster/cache/master", Rule: "redis-masters", TopologyKey: hostnameLabel},
		// The replicas whose shard is not known yet may be shard 0's.
		{Mark: "redis/shop/cache/shard//replica", Rule: "redis-master-replica", TopologyKey: hostnameLabel},
		{Mark: "redis/shop/cache/shard/0/replica", Rule: "redis-master-replica", TopologyKey: hostnameLabel},
		// Per zone, the shard as it is: a replica of unknown shard is never kept from a zone.
		{Mark: "redis/shop/cache/shard/0/replica", Rule: "redis-master-replica-zones", TopologyKey: zoneLabel},
	}
	spread := []model.Avoid{
		{Mark: "redis/shop/cache/cluster/cache/*", Rule: "redis-node-spread", TopologyKey: hostnameLabel, Weight: 1},
		{Mark: "redis/shop/cache/shard/0/*", Rule: "redis-shard-zones", TopologyKey: zoneLabel, Weight: 2},
	}
	keys := []string{"redis/shop/cache"}
	master := fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("u0").Redis("cache", "master", "0").Model()
	web := fixture.MakePod().Namespace("shop").Name("web-0").UID("u1").Label("app", "web").Model()
	tests := []struct {
		name     string
		describe func(context.Context, *model.Pod) ([]string, *model.Claims, error)
		pod      *model.Pod
		want     view
	}{
		{"all", p.Describe, master, view{Keys: keys, Has: []model.Parts{model.MarksPart, model.AvoidsPart}, Marks: marks, Separate: separate, Spread: spread, FromThisPolicy: true}},
		{"peer", p.DescribePeer, master, view{Keys: keys, Has: []model.Parts{model.MarksPart}, Marks: marks, FromThisPolicy: true}},
		{"pending", p.DescribePending, master, view{Keys: keys, Has: []model.Parts{model.AvoidsPart}, Separate: separate, Spread: spread, FromThisPolicy: true}},
		{"all, in no group", p.Describe, web, view{NoClaims: true}},
		{"peer, in no group", p.DescribePeer, web, view{NoClaims: true}},
		{"pending, in no group", p.DescribePending, web, view{NoClaims: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, c, err := tt.describe(context.Background(), tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tt.want, viewOf(p, keys, c), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("view mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCachedClaimsKeepMarksOnly: the cache's KeyFunc keeps what a peer
// needs; the pending pod's own entries are for the request only.
func TestCachedClaimsKeepMarksOnly(t *testing.T) {
	p := mustDefaultPolicy(t)
	master := fixture.MakePod().Namespace("shop").Name("m").UID("u").Redis("cache", "master", "0").Model()
	keys, full, err := p.Describe(context.Background(), master)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Separate()) == 0 || len(full.Spread()) == 0 {
		t.Fatalf("Describe() claims = %+v; want separate and spread entries", viewOf(p, keys, full))
	}
	cachedKeys, cached, err := Describer(func() *Policy { return p })(context.Background(), master)
	if err != nil {
		t.Fatal(err)
	}
	want := view{Keys: keys, Has: []model.Parts{model.MarksPart}, Marks: marksOf(full), FromThisPolicy: true}
	if diff := gocmp.Diff(want, viewOf(p, cachedKeys, cached)); diff != "" {
		t.Errorf("cached claims mismatch (-want +got):\n%s", diff)
	}
}

// TestDescribePeerSame: the claims the cache keeps for a bound pod are the
// same after a change of labels no rule reads, so that it is not audited
// again, and differ after a change of role or under another policy.
func TestDescribePeerSame(t *testing.T) {
	ctx := context.Background()
	pol := mustDefaultPolicy(t)
	other := compileFS(t, regosched.DefaultPolicy()) // the same bundle, another policy
	describe := func(p *Policy, labels map[string]string) *model.Claims {
		t.Helper()
		_, c, err := p.DescribePeer(ctx, fixture.MakePod().Namespace("shop").Name("cache-0").UID("u1").Labels(labels).Node("node-1").Model())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	replica := fixture.RedisLabels("cache", "replica", "0")
	relabel := func(k, v string) map[string]string {
		out := map[string]string{k: v}
		for k, v := range replica {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
		return out
	}
	base := describe(pol, replica)
	tests := []struct {
		name  string
		other *model.Claims
		want  bool
	}{
		{"described again", describe(pol, replica), true},
		{"the zone the API server adds at binding", describe(pol, relabel(zoneLabel, "zone-a")), true},
		{"another role", describe(pol, relabel(componentLabel, "master")), false},
		{"another shard", describe(pol, relabel(shardLabel, "1")), false},
		{"another policy", describe(other, replica), false},
		{"in no group now", describe(pol, relabel(nameLabel, "web")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := base.Same(tt.other); got != tt.want {
				t.Errorf("Same() = %v, want %v", got, tt.want)
			}
		})
	}
}

func BenchmarkPeerKeys(b *testing.B) {
	p := mustDefaultPolicy(b)
	ctx := context.Background()
	in := redisCluster()
	b.ReportAllocs()
	for b.Loop() {
		keys, err := p.PeerKeys(ctx, in.Pod)
		if err != nil || len(keys) != 1 {
			b.Fatalf("PeerKeys() = %v, %v", keys, err)
		}
	}
}

func BenchmarkDescribe(b *testing.B) {
	p := mustDefaultPolicy(b)
	ctx := context.Background()
	in := redisCluster()
	b.ReportAllocs()
	for b.Loop() {
		keys, c, err := p.Describe(ctx, in.Pod)
		if err != nil || len(keys) != 1 || c == nil {
			b.Fatalf("Describe() = %v, %v, %v", keys, c, err)
		}
	}
}

// BenchmarkDescribeViews: the three views of a Redis master: all its
// claims, as a peer (marks: the placement cache, once per pod version), as
// the pending pod (separate and spread: once per request).
func BenchmarkDescribeViews(b *testing.B) {
	p := mustDefaultPolicy(b)
	master := fixture.MakePod().Namespace("shop").Name("m").UID("u").Redis("cache", "master", "0").Model()
	for _, v := range []struct {
		name     string
		describe func(context.Context, *model.Pod) ([]string, *model.Claims, error)
	}{{"all", p.Describe}, {"peer", p.DescribePeer}, {"pending", p.DescribePending}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, c, err := v.describe(context.Background(), master); err != nil || c == nil {
					b.Fatal(c, err)
				}
			}
		})
	}
}
