package policy

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// TestJudgeDefaultPolicy: the hard and soft rules of the default policy
// between a pending pod and its peers, sorted as Judge documents (conflicts
// by node, peer; penalties by peer, rule).
func TestJudgeDefaultPolicy(t *testing.T) {
	p := mustDefaultPolicy(t)
	const cacheMaster = "redis: master shop/cache-0-master of cluster cache (shard 0) already on this node"
	spread := func(node string, peer types.UID) model.Penalty {
		return model.Penalty{TopologyKey: hostnameLabel, Value: node, Weight: 1, Rule: "redis-node-spread", Peer: peer}
	}
	tests := []struct {
		name string
		in   *Input
		want judged
	}{
		{
			name: "redis masters of one cluster",
			in: &Input{
				Pod:   fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("pending").Redis("cache", "master", "").Model(),
				Peers: []*model.Pod{fixture.MakePod().Namespace("shop").Name("cache-1-master").UID("u1").Redis("cache", "master", "").Node("node-1").Model()},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Domain: onNode("node-1"), Rule: "redis-masters", Reason: "redis: master shop/cache-1-master of cluster cache already on this node", Peer: "u1"}},
				Penalties: []model.Penalty{spread("node-1", "u1")},
			},
		},
		{
			name: "redis master vs masters and replicas of shards",
			in: &Input{
				Pod: fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("pending").Redis("cache", "master", "0").Model(),
				Peers: []*model.Pod{
					fixture.MakePod().Namespace("shop").Name("cache-1-master").UID("u1").Redis("cache", "master", "1").Node("node-1").Model(),
					fixture.MakePod().Namespace("shop").Name("cache-0-replica-0").UID("u2").Redis("cache", "replica", "0").Node("node-2").Model(),
					fixture.MakePod().Namespace("shop").Name("cache-1-replica-0").UID("u3").Redis("cache", "replica", "1").Node("node-3").Model(),
					fixture.MakePod().Namespace("shop").Name("cache-0-replica-1").UID("u4").Redis("cache", "slave", "0").Node("node-4").Model(),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}},
			},
			want: judged{
				Conflicts: []model.Conflict{
					{Node: "node-1", Domain: onNode("node-1"), Rule: "redis-masters", Reason: "redis: master shop/cache-1-master of cluster cache already on this node", Peer: "u1"},
					{Node: "node-2", Domain: onNode("node-2"), Rule: "redis-master-replica", Reason: "redis: replica shop/cache-0-replica-0 of cluster cache (shard 0) already on this node", Peer: "u2"},
					{Node: "node-4", Domain: onNode("node-4"), Rule: "redis-master-replica", Reason: "redis: replica shop/cache-0-replica-1 of cluster cache (shard 0) already on this node", Peer: "u4"},
				},
				// The peers of shard 0 are on nodes of unknown zone.
				Penalties: []model.Penalty{spread("node-1", "u1"), spread("node-2", "u2"), spread("node-3", "u3"), spread("node-4", "u4")},
			},
		},
		{
			name: "redis replica: spread across the cluster, zones within the shard",
			in: &Input{
				Pod: fixture.MakePod().Namespace("shop").Name("cache-0-replica-0").UID("pending").Redis("cache", "replica", "0").Model(),
				Peers: []*model.Pod{
					fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("u1").Redis("cache", "master", "0").Node("node-1").Model(),
					fixture.MakePod().Namespace("shop").Name("cache-1-replica-0").UID("u2").Redis("cache", "replica", "1").Node("node-2").Model(),
					fixture.MakePod().Namespace("shop").Name("other-0-master").UID("u3").Redis("other", "master", "0").Node("node-3").Model(),
				},
				Nodes: map[string]map[string]string{
					"node-1": {zoneLabel: "a", hostnameLabel: "node-1"},
					"node-2": {zoneLabel: "b"},
					"node-3": {zoneLabel: "c"},
				},
			},
			want: judged{
				Conflicts: []model.Conflict{
					// The master of the replica's shard keeps it out of zone a too ("in zone" sorts before "on this node").
					{Node: "node-1", Domain: model.Domain{Key: zoneLabel, Value: "a"}, Rule: "redis-master-replica-zones", Reason: "redis: master shop/cache-0-master of cluster cache (shard 0) already in zone a", Peer: "u1"},
					{Node: "node-1", Domain: onNode("node-1"), Rule: "redis-master-replica", Reason: cacheMaster, Peer: "u1"},
				},
				Penalties: []model.Penalty{
					spread("node-1", "u1"),
					{TopologyKey: zoneLabel, Value: "a", Weight: 2, Rule: "redis-shard-zones", Peer: "u1"},
					spread("node-2", "u2"),
				},
			},
		},
		{
			name: "peer node without zone, or unknown: spread only",
			in: &Input{
				Pod: fixture.MakePod().Namespace("shop").Name("cache-0-replica-0").UID("pending").Redis("cache", "replica", "0").Model(),
				Peers: []*model.Pod{
					fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("u1").Redis("cache", "master", "0").Node("node-1").Model(),
					fixture.MakePod().Namespace("shop").Name("cache-0-replica-1").UID("u2").Redis("cache", "replica", "0").Node("node-2").Model(),
				},
				Nodes: map[string]map[string]string{"node-1": {hostnameLabel: "node-1"}, "node-3": {zoneLabel: "a"}},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Domain: onNode("node-1"), Rule: "redis-master-replica", Reason: cacheMaster, Peer: "u1"}},
				Penalties: []model.Penalty{spread("node-1", "u1"), spread("node-2", "u2")},
			},
		},
		{
			name: "elasticsearch: data apart on nodes and zones, any role spread",
			in: &Input{
				Pod: fixture.MakePod().Namespace("shop").Name("logs-data-0").UID("pending").Elasticsearch("logs", "data").Model(),
				Peers: []*model.Pod{
					fixture.MakePod().Namespace("shop").Name("logs-data-1").UID("u1").Elasticsearch("logs", "data").Node("node-1").Model(),
					fixture.MakePod().Namespace("shop").Name("logs-master-0").UID("u2").Elasticsearch("logs", "master").Node("node-2").Model(),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}, "node-2": {zoneLabel: "b"}},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Domain: onNode("node-1"), Rule: "elasticsearch-data", Reason: "elasticsearch: data shop/logs-data-1 of cluster logs already on this node", Peer: "u1"}},
				Penalties: []model.Penalty{
					{TopologyKey: zoneLabel, Value: "a", Weight: 2, Rule: "elasticsearch-data-zones", Peer: "u1"},
					{TopologyKey: hostnameLabel, Value: "node-1", Weight: 1, Rule: "elasticsearch-node-spread", Peer: "u1"},
					{TopologyKey: hostnameLabel, Value: "node-2", Weight: 1, Rule: "elasticsearch-node-spread", Peer: "u2"},
				},
			},
		},
		{
			name: "eck data nodes",
			in: &Input{
				Pod: fixture.MakePod().Namespace("shop").Name("logs-es-data-0").UID("pending").Labels(eck("logs", "true")).Model(),
				Peers: []*model.Pod{
					fixture.MakePod().Namespace("shop").Name("logs-es-data-1").UID("u1").Labels(eck("logs", "true")).Node("node-1").Model(),
					fixture.MakePod().Namespace("shop").Name("logs-es-master-0").UID("u2").Labels(eck("logs", "false")).Node("node-2").Model(),
					fixture.MakePod().Namespace("shop").Name("other-es-data-0").UID("u3").Labels(eck("other", "true")).Node("node-3").Model(),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Domain: onNode("node-1"), Rule: "elasticsearch-eck-data", Reason: "elasticsearch: data shop/logs-es-data-1 of cluster logs already on this node", Peer: "u1"}},
				Penalties: []model.Penalty{
					{TopologyKey: zoneLabel, Value: "a", Weight: 2, Rule: "elasticsearch-eck-data-zones", Peer: "u1"},
					{TopologyKey: hostnameLabel, Value: "node-1", Weight: 1, Rule: "elasticsearch-eck-node-spread", Peer: "u1"},
					{TopologyKey: hostnameLabel, Value: "node-2", Weight: 1, Rule: "elasticsearch-eck-node-spread", Peer: "u2"},
				},
			},
		},
		{
			name: "eck pod of no role: spread only",
			in: &Input{
				Pod:   fixture.MakePod().Namespace("shop").Name("logs-es-master-0").UID("pending").Labels(eck("logs", "false")).Model(),
				Peers: []*model.Pod{fixture.MakePod().Namespace("shop").Name("logs-es-data-0").UID("u1").Labels(eck("logs", "true")).Node("node-1").Model()},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}},
			},
			want: judged{Penalties: []model.Penalty{{TopologyKey: hostnameLabel, Value: "node-1", Weight: 1, Rule: "elasticsearch-eck-node-spread", Peer: "u1"}}},
		},
		{
			name: "self, unbound, other namespace and unlabelled peers ignored",
			in: &Input{
				Pod: fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("u0").Redis("cache", "master", "").Model(),
				Peers: []*model.Pod{
					fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("u0").Redis("cache", "master", "").Node("node-1").Model(),
					fixture.MakePod().Namespace("shop").Name("cache-1-master").UID("u1").Redis("cache", "master", "").Model(),
					fixture.MakePod().Namespace("ops").Name("cache-2-master").UID("u2").Redis("cache", "master", "").Node("node-2").Model(),
					fixture.MakePod().Namespace("shop").Name("cache-3-master").UID("u3").Node("node-3").Model(),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}, "node-2": {zoneLabel: "a"}, "node-3": {zoneLabel: "a"}},
			},
		},
		{
			name: "pending pod with nil labels",
			in: &Input{
				Pod:   fixture.MakePod().Namespace("shop").Name("bare").UID("pending").Model(),
				Peers: []*model.Pod{fixture.MakePod().Namespace("shop").Name("cache-1-master").UID("u1").Redis("cache", "master", "").Node("node-1").Model()},
				Nodes: map[string]map[string]string{"node-1": nil},
			},
		},
		{
			name: "no peers",
			in:   &Input{Pod: fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("pending").Redis("cache", "master", "").Model()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { judgeBoth(t, p, tt.in, tt.want) })
	}
}
