# Soft rules: node spread and zone penalties, weights from data.
package regosched.prioritize_test

import data.regosched.fixtures_test as f
import data.regosched.join.penalties

host := "kubernetes.io/hostname"

zone := "topology.kubernetes.io/zone"

nodes := {
	"node-1": {"labels": {zone: "z1"}},
	"node-2": {"labels": {}},
	"node-3": {"labels": {zone: ""}},
}

test_redis_spread_and_shard_zone if {
	peers := [
		f.pod("cache-0-replica-0", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "0")),
		f.pod("cache-0-replica-1", "shop", "u2", "node-2", f.redis_shard("cache", "replica", "0")),
		f.pod("cache-1-master", "shop", "u3", "node-1", f.redis_shard("cache", "master", "1")),
		f.pod("cache-0-replica-2", "shop", "u4", "node-3", f.redis_shard("cache", "replica", "0")),
	]
	got := penalties with input as {
		"pod": f.pending("cache-0-master", f.redis_shard("cache", "master", "0")),
		"peers": peers,
		"nodes": nodes,
	}
	got == {
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "redis-node-spread", "peer": "u1"},
		{"topology_key": zone, "value": "z1", "weight": 2, "rule": "redis-shard-zones", "peer": "u1"},
		{"topology_key": host, "value": "node-2", "weight": 1, "rule": "redis-node-spread", "peer": "u2"},
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "redis-node-spread", "peer": "u3"},
		{"topology_key": host, "value": "node-3", "weight": 1, "rule": "redis-node-spread", "peer": "u4"},
	}
}

# Two replicas of one shard: no hard rule, but spread and zone still apply.
test_redis_replicas_soft_only if {
	got := penalties with input as {
		"pod": f.pending("cache-replicas-1", f.redis("cache", "replica")),
		"peers": [f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "replica"))],
		"nodes": nodes,
	}
	got == {
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "redis-node-spread", "peer": "u1"},
		{"topology_key": zone, "value": "z1", "weight": 2, "rule": "redis-shard-zones", "peer": "u1"},
	}
}

test_peer_node_missing_from_nodes_spread_only if {
	got := penalties with input as {
		"pod": f.pending("cache-0-master", f.redis("cache", "master")),
		"peers": [f.pod("cache-1-master", "shop", "u1", "node-9", f.redis("cache", "master"))],
	}
	got == {{"topology_key": host, "value": "node-9", "weight": 1, "rule": "redis-node-spread", "peer": "u1"}}
}

test_other_cluster_or_namespace_no_penalty if {
	count(penalties) == 0 with input as {
		"pod": f.pending("cache-0-master", f.redis("cache", "master")),
		"peers": [
			f.pod("other-0-master", "shop", "u1", "node-1", f.redis("other", "master")),
			f.pod("cache-0-master", "ops", "u2", "node-1", f.redis("cache", "master")),
		],
		"nodes": nodes,
	}
}

test_es_data_zone_only_between_data if {
	peers := [
		f.pod("es-data-0", "logs", "u1", "node-1", f.es("es", "data")),
		f.pod("es-master-0", "logs", "u2", "node-1", f.es("es", "master")),
	]
	got_data := penalties with input as {"pod": f.pod("es-data-1", "logs", "p", "", f.es("es", "data")), "peers": peers, "nodes": nodes}
	got_data == {
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "elasticsearch-node-spread", "peer": "u1"},
		{"topology_key": zone, "value": "z1", "weight": 2, "rule": "elasticsearch-data-zones", "peer": "u1"},
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "elasticsearch-node-spread", "peer": "u2"},
	}
	got_master := penalties with input as {"pod": f.pod("es-master-1", "logs", "p", "", f.es("es", "master")), "peers": peers, "nodes": nodes}
	got_master == {
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "elasticsearch-node-spread", "peer": "u1"},
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "elasticsearch-node-spread", "peer": "u2"},
	}
}

test_eck_data_zone if {
	got := penalties with input as {
		"pod": f.pod("qs-es-hot-1", "logs", "p", "", f.eck("qs", "true")),
		"peers": [f.pod("qs-es-hot-0", "logs", "u1", "node-1", f.eck("qs", "true"))],
		"nodes": nodes,
	}
	got == {
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "elasticsearch-eck-node-spread", "peer": "u1"},
		{"topology_key": zone, "value": "z1", "weight": 2, "rule": "elasticsearch-eck-data-zones", "peer": "u1"},
	}
}

test_unrelated_pods_no_penalty if {
	count(penalties) == 0 with input as {
		"pod": f.pending("web-0", {"app": "web"}),
		"peers": [f.pod("web-1", "shop", "u1", "node-1", {"app": "web"})],
		"nodes": nodes,
	}
}

# Weights and labels come from data: a rule's own weight wins, missing weights default to 1.
test_user_added_entry_weights_and_zone_label if {
	cfg := {
		"hostname_key": host,
		"zone_label": "example.com/rack",
		"workloads": {"kafka": {
			"match_labels": {"app": "kafka"},
			"cluster_label": "cluster",
			"node_spread": [{"name": "kafka-spread", "role": "*", "peer_role": "*", "scope": "cluster"}],
			"zone_apart": [{"name": "kafka-racks", "role": "*", "peer_role": "*", "scope": "cluster", "weight": 5}],
		}},
	}
	got := penalties with data.regosched.config as cfg
		with input as {
			"pod": f.pod("k-1", "mq", "p", "", {"app": "kafka", "cluster": "k"}),
			"peers": [f.pod("k-0", "mq", "u1", "node-1", {"app": "kafka", "cluster": "k"})],
			"nodes": {"node-1": {"labels": {"example.com/rack": "r1", zone: "z1"}}},
		}
	got == {
		{"topology_key": host, "value": "node-1", "weight": 1, "rule": "kafka-spread", "peer": "u1"},
		{"topology_key": "example.com/rack", "value": "r1", "weight": 5, "rule": "kafka-racks", "peer": "u1"},
	}
}
