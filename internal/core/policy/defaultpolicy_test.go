package policy

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
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
				Pod:   pod("cache-0-master", "pending", "", redis("cache", "master", "")),
				Peers: []*model.Pod{pod("cache-1-master", "u1", "node-1", redis("cache", "master", ""))},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Rule: "redis-masters", Reason: "redis: master shop/cache-1-master of cluster cache already on this node", Peer: "u1"}},
				Penalties: []model.Penalty{spread("node-1", "u1")},
			},
		},
		{
			name: "redis master vs masters and replicas of shards",
			in: &Input{
				Pod: pod("cache-0-master", "pending", "", redis("cache", "master", "0")),
				Peers: []*model.Pod{
					pod("cache-1-master", "u1", "node-1", redis("cache", "master", "1")),
					pod("cache-0-replica-0", "u2", "node-2", redis("cache", "replica", "0")),
					pod("cache-1-replica-0", "u3", "node-3", redis("cache", "replica", "1")),
					pod("cache-0-replica-1", "u4", "node-4", redis("cache", "slave", "0")),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}},
			},
			want: judged{
				Conflicts: []model.Conflict{
					{Node: "node-1", Rule: "redis-masters", Reason: "redis: master shop/cache-1-master of cluster cache already on this node", Peer: "u1"},
					{Node: "node-2", Rule: "redis-master-replica", Reason: "redis: replica shop/cache-0-replica-0 of cluster cache (shard 0) already on this node", Peer: "u2"},
					{Node: "node-4", Rule: "redis-master-replica", Reason: "redis: replica shop/cache-0-replica-1 of cluster cache (shard 0) already on this node", Peer: "u4"},
				},
				// The peers of shard 0 are on nodes of unknown zone.
				Penalties: []model.Penalty{spread("node-1", "u1"), spread("node-2", "u2"), spread("node-3", "u3"), spread("node-4", "u4")},
			},
		},
		{
			name: "redis replica: spread across the cluster, zones within the shard",
			in: &Input{
				Pod: pod("cache-0-replica-0", "pending", "", redis("cache", "replica", "0")),
				Peers: []*model.Pod{
					pod("cache-0-master", "u1", "node-1", redis("cache", "master", "0")),
					pod("cache-1-replica-0", "u2", "node-2", redis("cache", "replica", "1")),
					pod("other-0-master", "u3", "node-3", redis("other", "master", "0")),
				},
				Nodes: map[string]map[string]string{
					"node-1": {zoneLabel: "a", hostnameLabel: "node-1"},
					"node-2": {zoneLabel: "b"},
					"node-3": {zoneLabel: "c"},
				},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Rule: "redis-master-replica", Reason: cacheMaster, Peer: "u1"}},
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
				Pod: pod("cache-0-replica-0", "pending", "", redis("cache", "replica", "0")),
				Peers: []*model.Pod{
					pod("cache-0-master", "u1", "node-1", redis("cache", "master", "0")),
					pod("cache-0-replica-1", "u2", "node-2", redis("cache", "replica", "0")),
				},
				Nodes: map[string]map[string]string{"node-1": {hostnameLabel: "node-1"}, "node-3": {zoneLabel: "a"}},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Rule: "redis-master-replica", Reason: cacheMaster, Peer: "u1"}},
				Penalties: []model.Penalty{spread("node-1", "u1"), spread("node-2", "u2")},
			},
		},
		{
			name: "elasticsearch: data apart on nodes and zones, any role spread",
			in: &Input{
				Pod: pod("logs-data-0", "pending", "", es("data")),
				Peers: []*model.Pod{
					pod("logs-data-1", "u1", "node-1", es("data")),
					pod("logs-master-0", "u2", "node-2", es("master")),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}, "node-2": {zoneLabel: "b"}},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Rule: "elasticsearch-data", Reason: "elasticsearch: data shop/logs-data-1 of cluster logs already on this node", Peer: "u1"}},
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
				Pod: pod("logs-es-data-0", "pending", "", eck("logs", "true")),
				Peers: []*model.Pod{
					pod("logs-es-data-1", "u1", "node-1", eck("logs", "true")),
					pod("logs-es-master-0", "u2", "node-2", eck("logs", "false")),
					pod("other-es-data-0", "u3", "node-3", eck("other", "true")),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}},
			},
			want: judged{
				Conflicts: []model.Conflict{{Node: "node-1", Rule: "elasticsearch-eck-data", Reason: "elasticsearch: data shop/logs-es-data-1 of cluster logs already on this node", Peer: "u1"}},
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
				Pod:   pod("logs-es-master-0", "pending", "", eck("logs", "false")),
				Peers: []*model.Pod{pod("logs-es-data-0", "u1", "node-1", eck("logs", "true"))},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}},
			},
			want: judged{Penalties: []model.Penalty{{TopologyKey: hostnameLabel, Value: "node-1", Weight: 1, Rule: "elasticsearch-eck-node-spread", Peer: "u1"}}},
		},
		{
			name: "self, unbound, other namespace and unlabelled peers ignored",
			in: &Input{
				Pod: pod("cache-0-master", "u0", "", redis("cache", "master", "")),
				Peers: []*model.Pod{
					pod("cache-0-master", "u0", "node-1", redis("cache", "master", "")),
					pod("cache-1-master", "u1", "", redis("cache", "master", "")),
					inNamespace("ops", pod("cache-2-master", "u2", "node-2", redis("cache", "master", ""))),
					pod("cache-3-master", "u3", "node-3", nil),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}, "node-2": {zoneLabel: "a"}, "node-3": {zoneLabel: "a"}},
			},
		},
		{
			name: "pending pod with nil labels",
			in: &Input{
				Pod:   pod("bare", "pending", "", nil),
				Peers: []*model.Pod{pod("cache-1-master", "u1", "node-1", redis("cache", "master", ""))},
				Nodes: map[string]map[string]string{"node-1": nil},
			},
		},
		{
			name: "no peers",
			in:   &Input{Pod: pod("cache-0-master", "pending", "", redis("cache", "master", ""))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { judgeBoth(t, p, tt.in, tt.want) })
	}
}
