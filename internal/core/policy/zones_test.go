package policy

import (
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// TestJoinPerZone: a separate entry with a topology_key keeps the pod out
// of the peer's domain of that key, named in the reason; a peer on a node
// without the label, or a cluster of one domain, refuses nothing (the
// audit reports those pods).
func TestJoinPerZone(t *testing.T) {
	p := compileFS(t, fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""

claims := {
	"marks": {"web": "{pod} serves web already on this node"},
	"separate": [
		{"mark": "web", "rule": "web-per-node"},
		{"mark": "web", "rule": "web-per-zone", "topology_key": "topology.kubernetes.io/zone"},
	],
} if input.pod.labels.app == "web"
`)},
	})
	const zone = "topology.kubernetes.io/zone"
	web := map[string]string{"app": "web"}
	pending := fixture.MakePod().Namespace("shop").Name("web-new").UID("pending").Labels(web).Model()
	peer := func(uid, node string) *model.Pod {
		return fixture.MakePod().Namespace("shop").Name("web-" + uid).UID(uid).Labels(web).Node(node).Model()
	}
	perNode := func(uid, node string) model.Conflict {
		return model.Conflict{Node: node, Domain: onNode(node), Rule: "web-per-node", Reason: "shop/web-" + uid + " serves web already on this node", Peer: types.UID(uid)}
	}
	threeZones := fixture.Nodes{"n1": {zone: "a"}, "n2": {zone: "b"}, "n3": {zone: "c"}, "bare": {}}
	tests := []struct {
		name  string
		nodes fixture.Nodes
		peers []*model.Pod
		want  []model.Conflict
	}{
		{
			name:  "a peer in zone a keeps the pod out of its node and of zone a",
			nodes: threeZones,
			peers: []*model.Pod{peer("u1", "n1")},
			want: []model.Conflict{
				{Node: "n1", Domain: model.Domain{Key: zone, Value: "a"}, Rule: "web-per-zone", Reason: "shop/web-u1 serves web already in zone a", Peer: "u1"},
				perNode("u1", "n1"),
			},
		},
		{
			name:  "a peer on a node without the zone label: its node alone",
			nodes: threeZones,
			peers: []*model.Pod{peer("u1", "bare")},
			want:  []model.Conflict{perNode("u1", "bare")},
		},
		{
			name:  "one zone in the cluster: no rule per zone can be met, none refuses",
			nodes: fixture.Nodes{"n1": {zone: "a"}, "n2": {zone: "a"}},
			peers: []*model.Pod{peer("u1", "n1")},
			want:  []model.Conflict{perNode("u1", "n1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			judgeBoth(t, p, NewInput(pending, tt.peers, tt.nodes), judged{Conflicts: tt.want})
		})
	}
}
