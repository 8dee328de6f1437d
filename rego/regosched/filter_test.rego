# Hard rules: which peers conflict with the pending pod, with exact reasons.
package regosched.filter_test

import data.regosched.fixtures_test as f
import data.regosched.join.conflicts

master_reason := "redis: master shop/cache-1-master of cluster cache already on this node"

test_redis_masters_same_cluster_conflict if {
	peer := f.pod("cache-1-master", "shop", "u1", "node-1", f.redis("cache", "master"))
	conflicts == {{"node": "node-1", "rule": "redis-masters", "reason": master_reason, "peer": "u1"}} with input as {
		"pod": f.pending("cache-0-master", f.redis("cache", "master")),
		"peers": [peer],
		"nodes": {},
	}
}

test_redis_masters_other_cluster_or_namespace_no_conflict if {
	peers := [
		f.pod("other-0-master", "shop", "u1", "node-1", f.redis("other", "master")),
		f.pod("cache-1-master", "ops", "u2", "node-2", f.redis("cache", "master")),
	]
	count(conflicts) == 0 with input as {"pod": f.pending("cache-0-master", f.redis("cache", "master")), "peers": peers}
}

# Masters of different shards still conflict; the cluster-scoped reason has no shard.
test_redis_masters_across_shards_conflict if {
	peer := f.pod("cache-1-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "1"))
	conflicts == {{"node": "node-1", "rule": "redis-masters", "reason": master_reason, "peer": "u1"}} with input as {
		"pod": f.pending("cache-0-master", f.redis_shard("cache", "master", "0")),
		"peers": [peer],
	}
}

test_redis_master_vs_replica_same_shard_conflict if {
	peer := f.pod("cache-0-replica-0", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "0"))
	reason := "redis: replica shop/cache-0-replica-0 of cluster cache (shard 0) already on this node"
	conflicts == {{"node": "node-1", "rule": "redis-master-replica", "reason": reason, "peer": "u1"}} with input as {
		"pod": f.pending("cache-0-master", f.redis_shard("cache", "master", "0")),
		"peers": [peer],
	}
}

test_redis_replica_vs_master_same_shard_conflict if {
	peer := f.pod("cache-0-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "0"))
	reason := "redis: master shop/cache-0-master of cluster cache (shard 0) already on this node"
	conflicts == {{"node": "node-1", "rule": "redis-master-replica", "reason": reason, "peer": "u1"}} with input as {
		"pod": f.pending("cache-0-replica-0", f.redis_shard("cache", "replica", "0")),
		"peers": [peer],
	}
}

test_redis_master_replica_different_shards_no_conflict if {
	count(conflicts) == 0 with input as {
		"pod": f.pending("cache-0-master", f.redis_shard("cache", "master", "0")),
		"peers": [f.pod("cache-1-replica-0", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "1"))],
	}
	count(conflicts) == 0 with input as {
		"pod": f.pending("cache-0-replica-0", f.redis_shard("cache", "replica", "0")),
		"peers": [f.pod("cache-1-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "1"))],
	}
}

test_redis_two_replicas_no_conflict if {
	count(conflicts) == 0 with input as {
		"pod": f.pending("cache-replicas-1", f.redis("cache", "replica")),
		"peers": [f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "replica"))],
	}
}

# Bitnami-style: no shard label, the cluster is one shard; no shard in the reason.
test_redis_single_shard_without_label if {
	reason := "redis: replica shop/cache-replicas-0 of cluster cache already on this node"
	conflicts == {{"node": "node-1", "rule": "redis-master-replica", "reason": reason, "peer": "u1"}} with input as {
		"pod": f.pending("cache-master-0", f.redis("cache", "master")),
		"peers": [f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "replica"))],
	}
}

# A shard label on one side only means different shards.
test_redis_shard_label_one_side_no_conflict if {
	count(conflicts) == 0 with input as {
		"pod": f.pending("cache-master-0", f.redis("cache", "master")),
		"peers": [f.pod("cache-0-replica-0", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "0"))],
	}
}

test_redis_slave_alias_is_replica if {
	reason := "redis: replica shop/cache-slave-0 of cluster cache already on this node"
	conflicts == {{"node": "node-1", "rule": "redis-master-replica", "reason": reason, "peer": "u1"}} with input as {
		"pod": f.pending("cache-master-0", f.redis("cache", "master")),
		"peers": [f.pod("cache-slave-0", "shop", "u1", "node-1", f.redis("cache", "slave"))],
	}
	count(conflicts) == 0 with input as {
		"pod": f.pending("cache-slave-1", f.redis("cache", "slave")),
		"peers": [f.pod("cache-replica-0", "shop", "u1", "node-1", f.redis("cache", "replica"))],
	}
}

# After failover the former replica carries master labels: masters-apart applies.
test_redis_failover_relabel_counts_current_role if {
	peer := f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "master"))
	reason := "redis: master shop/cache-replicas-0 of cluster cache already on this node"
	conflicts == {{"node": "node-1", "rule": "redis-masters", "reason": reason, "peer": "u1"}} with input as {
		"pod": f.pending("cache-master-0", f.redis("cache", "master")),
		"peers": [peer],
	}
}

test_one_conflict_per_peer if {
	peers := [
		f.pod("cache-1-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "1")),
		f.pod("cache-0-replica-0", "shop", "u2", "node-2", f.redis_shard("cache", "replica", "0")),
		f.pod("cache-0-replica-1", "shop", "u3", "node-2", f.redis_shard("cache", "replica", "0")),
		f.pod("cache-1-replica-0", "shop", "u4", "node-3", f.redis_shard("cache", "replica", "1")),
	]
	got := conflicts with input as {"pod": f.pending("cache-0-master", f.redis_shard("cache", "master", "0")), "peers": peers}
	{[c.peer, c.node, c.rule] | some c in got} == {
		["u1", "node-1", "redis-masters"],
		["u2", "node-2", "redis-master-replica"],
		["u3", "node-2", "redis-master-replica"],
	}
}

# Keys may overlap across entries: same instance name but another workload.
test_other_workload_same_instance_no_conflict if {
	count(conflicts) == 0 with input as {
		"pod": f.pending("cache-0-master", f.redis("cache", "master")),
		"peers": [f.pod("cache-data-0", "shop", "u1", "node-1", f.es("cache", "master"))],
	}
}

test_self_and_unbound_peers_ignored if {
	count(conflicts) == 0 with input as {
		"pod": f.pending("cache-0-master", f.redis("cache", "master")),
		"peers": [
			f.pod("cache-0-master", "shop", "pending", "node-1", f.redis("cache", "master")),
			f.pod("cache-1-master", "shop", "u2", "", f.redis("cache", "master")),
		],
	}
}

test_es_data_vs_data_conflict if {
	reason := "elasticsearch: data logs/es-data-0 of cluster es already on this node"
	conflicts == {{"node": "node-1", "rule": "elasticsearch-data", "reason": reason, "peer": "u1"}} with input as {
		"pod": f.pod("es-data-1", "logs", "pending", "", f.es("es", "data")),
		"peers": [f.pod("es-data-0", "logs", "u1", "node-1", f.es("es", "data"))],
	}
}

test_es_non_data_roles_unconstrained if {
	count(conflicts) == 0 with input as {
		"pod": f.pod("es-master-1", "logs", "pending", "", f.es("es", "master")),
		"peers": [
			f.pod("es-master-0", "logs", "u1", "node-1", f.es("es", "master")),
			f.pod("es-data-0", "logs", "u2", "node-1", f.es("es", "data")),
		],
	}
	count(conflicts) == 0 with input as {
		"pod": f.pod("es-data-1", "logs", "pending", "", f.es("es", "data")),
		"peers": [f.pod("es-ingest-0", "logs", "u1", "node-1", f.es("es", "ingest"))],
	}
}

test_eck_data_vs_data_conflict if {
	reason := "elasticsearch: data logs/quickstart-es-hot-0 of cluster quickstart already on this node"
	conflicts == {{"node": "node-1", "rule": "elasticsearch-eck-data", "reason": reason, "peer": "u1"}} with input as {
		"pod": f.pod("quickstart-es-hot-1", "logs", "pending", "", f.eck("quickstart", "true")),
		"peers": [f.pod("quickstart-es-hot-0", "logs", "u1", "node-1", f.eck("quickstart", "true"))],
	}
}

test_eck_non_data_and_other_cluster_no_conflict if {
	count(conflicts) == 0 with input as {
		"pod": f.pod("quickstart-es-master-1", "logs", "pending", "", f.eck("quickstart", "false")),
		"peers": [f.pod("quickstart-es-hot-0", "logs", "u1", "node-1", f.eck("quickstart", "true"))],
	}
	count(conflicts) == 0 with input as {
		"pod": f.pod("quickstart-es-hot-1", "logs", "pending", "", f.eck("quickstart", "true")),
		"peers": [f.pod("other-es-hot-0", "logs", "u1", "node-1", f.eck("other", "true"))],
	}
}

test_unrelated_pods_no_conflict if {
	count(conflicts) == 0 with input as {
		"pod": f.pending("web-0", {"app": "web"}),
		"peers": [f.pod("web-1", "shop", "u1", "node-1", {"app": "web"})],
	}
}

# A workload added in data only; "*" peer_role names the peer's roles (or "pod").
kafka_config := {"workloads": {"kafka": {
	"match_labels": {"app": "kafka"},
	"cluster_label": "cluster",
	"roles": {"broker": [{"role": "broker"}]},
	"separate": [{"name": "kafka-apart", "role": "*", "peer_role": "*", "scope": "cluster"}],
}}}

test_user_added_workload_entry if {
	got := conflicts with data.regosched.config as kafka_config
		with input as {
			"pod": f.pod("k-2", "mq", "pending", "", {"app": "kafka", "cluster": "k", "role": "broker"}),
			"peers": [
				f.pod("k-0", "mq", "u1", "node-1", {"app": "kafka", "cluster": "k", "role": "broker"}),
				f.pod("k-zk-0", "mq", "u2", "node-2", {"app": "kafka", "cluster": "k"}),
			],
		}
	got == {
		{"node": "node-1", "rule": "kafka-apart", "reason": "kafka: broker mq/k-0 of cluster k already on this node", "peer": "u1"},
		{"node": "node-2", "rule": "kafka-apart", "reason": "kafka: pod mq/k-zk-0 of cluster k already on this node", "peer": "u2"},
	}
}

# Go may marshal a nil label map as null: such peers are simply not peers.
test_null_labels_tolerated if {
	count(conflicts) == 0 with input as {
		"pod": f.pending("cache-0-master", f.redis("cache", "master")),
		"peers": [f.pod("x", "shop", "u1", "node-1", null)],
	}
}
