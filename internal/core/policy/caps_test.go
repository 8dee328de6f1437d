package policy

import (
	"fmt"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/types"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// TestJoinCaps: a cap refuses the domains that hold as many of its group
// as it allows (a quorum: fewer than half of the group, the pod counted),
// naming each member there, and refuses nothing where no placement could
// meet it.
func TestJoinCaps(t *testing.T) {
	p := compileFS(t, fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""

claims := {
	"marks": {"master": "{pod} of the masters already on this node"},
	"cap": [object.union(
		{"mark": "master", "rule": "quorum", "topology_key": "zone", "quorum": true, "size_from_statefulsets": true},
		{"size": to_number(s) | s := input.pod.labels.size},
	)],
} if input.pod.labels.app == "db"

claims := {
	"marks": {"web": "{pod} serves web already on this node"},
	"cap": [{"mark": "web", "rule": "two-webs", "topology_key": "zone", "max": 2}],
} if input.pod.labels.app == "web"

claims := {
	"marks": {"kv": "{pod} of the masters already on this node"},
	"cap": [{"mark": "kv", "rule": "kv-quorum", "topology_key": "zone", "quorum": true}],
} if input.pod.labels.app == "kv"
`)},
	})
	member := func(app, uid, node string) *model.Pod {
		return fixture.MakePod().Namespace("shop").Name(app+"-"+uid).UID(uid).Label("app", app).Node(node).Model()
	}
	capped := func(app, uid, node, zone, rule, tail string) model.Conflict {
		what := "of the masters"
		if app == "web" {
			what = "serves web"
		}
		return model.Conflict{Node: node, Domain: model.Domain{Key: "zone", Value: zone}, Rule: rule,
			Reason: fmt.Sprintf("shop/%s-%s %s already in zone %s: %s", app, uid, what, zone, tail), Peer: types.UID(uid)}
	}
	threeZones := fixture.Nodes{"a1": {"zone": "a"}, "a2": {"zone": "a"}, "b1": {"zone": "b"}, "c1": {"zone": "c"}}
	twoZones := fixture.Nodes{"a1": {"zone": "a"}, "a2": {"zone": "a"}, "b1": {"zone": "b"}}
	sts := func(w *fixture.PodWrapper, set string) *model.Pod { return w.StatefulSet(set, "sts-uid").Model() }
	withSets := fixture.Cluster{Nodes: threeZones, StatefulSets: map[string]int{"shop/db-masters": 3, "shop/db-more": 2}}
	tests := []struct {
		name    string
		pending *model.Pod
		nodes   Cluster
		peers   []*model.Pod
		want    []model.Conflict
	}{
		{
			name:    "a second member of a StatefulSet of three stays out of the first's zone",
			pending: sts(fixture.MakePod().Namespace("shop").Name("db-new").UID("new").Label("app", "db"), "db-masters"),
			nodes:   withSets,
			peers:   []*model.Pod{sts(fixture.MakePod().Namespace("shop").Name("db-u1").UID("u1").Label("app", "db").Node("a1"), "db-masters")},
			want:    []model.Conflict{capped("db", "u1", "a1", "a", "quorum", "with this pod 2 of 3 there, fewer than half may be")},
		},
		{
			// Masters and replicas in one StatefulSet of 6 (a Redis Cluster
			// chart's): its replicas are no size of the masters' group.
			name:    "a StatefulSet counts only where the cap says so",
			pending: sts(fixture.MakePod().Namespace("shop").Name("kv-new").UID("new").Label("app", "kv"), "kv"),
			nodes:   fixture.Cluster{Nodes: threeZones, StatefulSets: map[string]int{"shop/kv": 6}},
			peers: []*model.Pod{
				sts(fixture.MakePod().Namespace("shop").Name("kv-u1").UID("u1").Label("app", "kv").Node("a1"), "kv"),
				sts(fixture.MakePod().Namespace("shop").Name("kv-u2").UID("u2").Label("app", "kv").Node("b1"), "kv"),
			},
			want: []model.Conflict{
				capped("kv", "u1", "a1", "a", "kv-quorum", "with this pod 2 of 3 there, fewer than half may be"),
				capped("kv", "u2", "b1", "b", "kv-quorum", "with this pod 2 of 3 there, fewer than half may be"),
			},
		},
		{
			// 3 + 2 members: a zone may hold two.
			name:    "the StatefulSets of the members add up",
			pending: sts(fixture.MakePod().Namespace("shop").Name("db-new").UID("new").Label("app", "db"), "db-more"),
			nodes:   withSets,
			peers: []*model.Pod{
				sts(fixture.MakePod().Namespace("shop").Name("db-u1").UID("u1").Label("app", "db").Node("a1"), "db-masters"),
				sts(fixture.MakePod().Namespace("shop").Name("db-u2").UID("u2").Label("app", "db").Node("b1"), "db-masters"),
			},
		},
		{
			name:    "the third of three masters stays out of the zone of another",
			pending: fixture.MakePod().Namespace("shop").Name("db-new").UID("new").Label("app", "db").Model(),
			nodes:   threeZones,
			peers:   []*model.Pod{member("db", "u1", "a1"), member("db", "u2", "b1")},
			want: []model.Conflict{
				capped("db", "u1", "a1", "a", "quorum", "with this pod 2 of 3 there, fewer than half may be"),
				capped("db", "u2", "b1", "b", "quorum", "with this pod 2 of 3 there, fewer than half may be"),
			},
		},
		{
			name:    "a second master of a group of two: no majority to keep, nothing refused",
			pending: fixture.MakePod().Namespace("shop").Name("db-new").UID("new").Label("app", "db").Model(),
			nodes:   threeZones,
			peers:   []*model.Pod{member("db", "u1", "a1")},
		},
		{
			name:    "the size the policy states counts before the members do",
			pending: fixture.MakePod().Namespace("shop").Name("db-new").UID("new").Label("app", "db").Label("size", "3").Model(),
			nodes:   threeZones,
			peers:   []*model.Pod{member("db", "u1", "a1")},
			want:    []model.Conflict{capped("db", "u1", "a1", "a", "quorum", "with this pod 2 of 3 there, fewer than half may be")},
		},
		{
			name:    "three masters over two zones cannot keep a majority: nothing refused",
			pending: fixture.MakePod().Namespace("shop").Name("db-new").UID("new").Label("app", "db").Model(),
			nodes:   twoZones,
			peers:   []*model.Pod{member("db", "u1", "a1"), member("db", "u2", "b1")},
		},
		{
			name:    "a zone at its max refuses, one below does not",
			pending: fixture.MakePod().Namespace("shop").Name("web-new").UID("new").Label("app", "web").Model(),
			nodes:   threeZones,
			peers:   []*model.Pod{member("web", "u1", "a1"), member("web", "u2", "a2"), member("web", "u3", "b1")},
			want: []model.Conflict{
				capped("web", "u1", "a1", "a", "two-webs", "with this pod 3 of 4 there, at most 2 may be"),
				capped("web", "u2", "a2", "a", "two-webs", "with this pod 3 of 4 there, at most 2 may be"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			judgeBoth(t, p, NewInput(tt.pending, tt.peers, tt.nodes), judged{Conflicts: tt.want})
		})
	}
}

// TestReadCapsRefusesMalformed: a cap entry a policy gets wrong is an
// error that names it, never a cap of zero.
func TestReadCapsRefusesMalformed(t *testing.T) {
	for _, tt := range []struct{ name, cap string }{
		{"no mark", `[{"rule": "r", "topology_key": "zone", "max": 1}]`},
		{"no topology key", `[{"mark": "m", "rule": "r", "max": 1}]`},
		{"neither max nor quorum", `[{"mark": "m", "rule": "r", "topology_key": "zone"}]`},
		{"max zero", `[{"mark": "m", "rule": "r", "topology_key": "zone", "max": 0}]`},
		{"quorum not a boolean", `[{"mark": "m", "rule": "r", "topology_key": "zone", "quorum": "yes"}]`},
		{"size not an integer", `[{"mark": "m", "rule": "r", "topology_key": "zone", "quorum": true, "size": 2.5}]`},
		{"size negative", `[{"mark": "m", "rule": "r", "topology_key": "zone", "quorum": true, "size": -1}]`},
		{"size_from_statefulsets not a boolean", `[{"mark": "m", "rule": "r", "topology_key": "zone", "quorum": true, "size_from_statefulsets": 1}]`},
		{"not an object", `["m"]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if caps, err := readCaps(ast.MustParseTerm(tt.cap)); err == nil {
				t.Errorf("readCaps(%s) = %v, want an error", tt.cap, caps)
			}
		})
	}
}
