# Soft rules: node spread and zone penalties, weights from data, read off
# the claims of both pods. regosched turns each into a penalty on the peer's
# domain: its node for the hostname key, else its node's label.
package regosched.prioritize_test

import data.regosched.fixtures_test as f

host := "kubernetes.io/hostname"

zone := "topology.kubernetes.io/zone"

node_spread := {"topology_key": host, "weight": 1, "rule": "redis-node-spread"}

shard_zones := {"topology_key": zone, "weight": 2, "rule": "redis-shard-zones"}

test_redis_spread_and_shard_zone if {
	pending := f.pending("cache-0-master", f.redis_shard("cache", "master", "0"))
	f.spreads(pending, f.pod("cache-0-replica-0", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "0"))) == {node_spread, shard_zones}
	f.spreads(pending, f.pod("cache-1-master", "shop", "u3", "node-1", f.redis_shard("cache", "master", "1"))) == {node_spread}
}

# Two replicas of one shard: no hard rule, but spread and zone still apply.
test_redis_replicas_soft_only if {
	pending := f.pending("cache-replicas-1", f.redis("cache", "replica"))
	peer := f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "replica"))
	count(f.separates(pending, peer)) == 0
	f.spreads(pending, peer) == {node_spread, shard_zones}
}

# A spread entry names a topology key, never a domain: the claims are the
# same whatever node the peer is on (zone z1, no zone label, an empty one,
# or node-9, which regosched does not know). Whether the peer's node is in a
# domain of the key (no zone penalty without a zone label) is regosched's
# to look up.
test_spread_names_topology_key_not_domain if {
	pending := f.pending("cache-0-master", f.redis_shard("cache", "master", "0"))
	every node in ["node-1", "node-2", "node-3", "node-9"] {
		f.spreads(pending, f.pod("cache-0-replica-1", "shop", "u2", node, f.redis_shard("cache", "replica", "0"))) == {node_spread, shard_zones}
	}
	f.spreads(
		f.pending("cache-0-master", f.redis("cache", "master")),
		f.pod("cache-1-master", "shop", "u1", "node-9", f.redis("cache", "master")),
	) == {node_spread, shard_zones}
}

test_other_cluster_or_namespace_no_penalty if {
	pending := f.pending("cache-0-master", f.redis("cache", "master"))
	count(f.spreads(pending, f.pod("other-0-master", "shop", "u1", "node-1", f.redis("other", "master")))) == 0
	count(f.spreads(pending, f.pod("cache-0-master", "ops", "u2", "node-1", f.redis("cache", "master")))) == 0
}

test_es_data_zone_only_between_data if {
	data_peer := f.pod("es-data-0", "logs", "u1", "node-1", f.es("es", "data"))
	master_peer := f.pod("es-master-0", "logs", "u2", "node-1", f.es("es", "master"))
	es_spread := {"topology_key": host, "weight": 1, "rule": "elasticsearch-node-spread"}
	data_pending := f.pod("es-data-1", "logs", "p", "", f.es("es", "data"))
	f.spreads(data_pending, data_peer) == {es_spread, {"topology_key": zone, "weight": 2, "rule": "elasticsearch-data-zones"}}
	f.spreads(data_pending, master_peer) == {es_spread}
	master_pending := f.pod("es-master-1", "logs", "p", "", f.es("es", "master"))
	f.spreads(master_pending, data_peer) == {es_spread}
	f.spreads(master_pending, master_peer) == {es_spread}
}

test_eck_data_zone if {
	got := f.spreads(
		f.pod("qs-es-hot-1", "logs", "p", "", f.eck("qs", "true")),
		f.pod("qs-es-hot-0", "logs", "u1", "node-1", f.eck("qs", "true")),
	)
	got == {
		{"topology_key": host, "weight": 1, "rule": "elasticsearch-eck-node-spread"},
		{"topology_key": zone, "weight": 2, "rule": "elasticsearch-eck-data-zones"},
	}
}

test_unrelated_pods_no_penalty if {
	count(f.spreads(f.pending("web-0", {"app": "web"}), f.pod("web-1", "shop", "u1", "node-1", {"app": "web"}))) == 0
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
	got := f.spreads(
		f.pod("k-1", "mq", "p", "", {"app": "kafka", "cluster": "k"}),
		f.pod("k-0", "mq", "u1", "node-1", {"app": "kafka", "cluster": "k"}),
	) with data.regosched.config as cfg
	got == {
		{"topology_key": host, "weight": 1, "rule": "kafka-spread"},
		{"topology_key": "example.com/rack", "weight": 5, "rule": "kafka-racks"},
	}
}
