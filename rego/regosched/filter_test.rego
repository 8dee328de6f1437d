# Hard rules: which peers the pending pod's claims keep it apart from, read
# off the claims of both pods, with the exact descriptions ({pod} is the
# peer's namespace/name in a denial).
package regosched.filter_test

import data.regosched.fixtures_test as f

master_reason := "redis: master {pod} of cluster cache already on this node"

# A master avoids other masters of its cluster: the pending master's
# separate holds a mark that the peer master's marks hold.
test_redis_masters_same_cluster_conflict if {
	pending := f.pending("cache-0-master", f.redis("cache", "master"))
	peer := f.pod("cache-1-master", "shop", "u1", "node-1", f.redis("cache", "master"))
	some s in f.claims_of(pending).separate
	s.rule == "redis-masters"
	f.claims_of(peer).marks[s.mark] == master_reason
	f.separates(pending, peer) == {{"rule": "redis-masters", "reason": master_reason}}
}

test_redis_masters_other_cluster_or_namespace_no_conflict if {
	pending := f.pending("cache-0-master", f.redis("cache", "master"))
	peers := [
		f.pod("other-0-master", "shop", "u1", "node-1", f.redis("other", "master")),
		f.pod("cache-1-master", "ops", "u2", "node-2", f.redis("cache", "master")),
	]
	every peer in peers {
		count(f.separates(pending, peer)) == 0
	}
}

# Masters of different shards still conflict; the cluster-scoped reason has no shard.
test_redis_masters_across_shards_conflict if {
	peer := f.pod("cache-1-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "1"))
	got := f.separates(f.pending("cache-0-master", f.redis_shard("cache", "master", "0")), peer)
	got == {{"rule": "redis-masters", "reason": master_reason}}
}

test_redis_master_vs_replica_same_shard_conflict if {
	peer := f.pod("cache-0-replica-0", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "0"))
	reason := "redis: replica {pod} of cluster cache (shard 0) already on this node"
	got := f.separates(f.pending("cache-0-master", f.redis_shard("cache", "master", "0")), peer)
	got == {{"rule": "redis-master-replica", "reason": reason}}
}

test_redis_replica_vs_master_same_shard_conflict if {
	peer := f.pod("cache-0-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "0"))
	reason := "redis: master {pod} of cluster cache (shard 0) already on this node"
	got := f.separates(f.pending("cache-0-replica-0", f.redis_shard("cache", "replica", "0")), peer)
	got == {{"rule": "redis-master-replica", "reason": reason}}
}

# A master and a replica of another shard may share a node: no mark of the
# pending pod's separate is in the other's marks.
test_redis_master_replica_different_shards_no_conflict if {
	count(f.separates(
		f.pending("cache-0-master", f.redis_shard("cache", "master", "0")),
		f.pod("cache-1-replica-0", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "1")),
	)) == 0
	count(f.separates(
		f.pending("cache-0-replica-0", f.redis_shard("cache", "replica", "0")),
		f.pod("cache-1-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "1")),
	)) == 0
}

test_redis_two_replicas_no_conflict if {
	count(f.separates(
		f.pending("cache-replicas-1", f.redis("cache", "replica")),
		f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "replica")),
	)) == 0
}

# Bitnami-style: no shard label, the cluster is one shard; no shard in the reason.
test_redis_single_shard_without_label if {
	got := f.separates(
		f.pending("cache-master-0", f.redis("cache", "master")),
		f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "replica")),
	)
	got == {{"rule": "redis-master-replica", "reason": "redis: replica {pod} of cluster cache already on this node"}}
}

# A shard label on one side only: the other pod's shard is unknown (not read
# yet), and may be that shard. The pod of unknown shard is kept from the
# peer role's pods of every shard, and one of known shard from those of
# unknown shard: a guess never loosens a hard rule.
test_redis_shard_unknown_on_one_side_conflicts if {
	f.separates(
		f.pending("cache-master-0", f.redis("cache", "master")),
		f.pod("cache-0-replica-0", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "0")),
	) == {{"rule": "redis-master-replica", "reason": "redis: replica {pod} of cluster cache already on this node"}}
	f.separates(
		f.pending("cache-0-master", f.redis_shard("cache", "master", "0")),
		f.pod("cache-replica-0", "shop", "u1", "node-1", f.redis("cache", "replica")),
	) == {{"rule": "redis-master-replica", "reason": "redis: replica {pod} of cluster cache already on this node"}}
	f.separates(
		f.pending("cache-replica-1", f.redis("cache", "replica")),
		f.pod("cache-1-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "1")),
	) == {{"rule": "redis-master-replica", "reason": master_reason}}
}

# Known shards that differ still part: the rule stays within a shard.
test_redis_known_shards_differ_no_conflict if {
	count(f.separates(
		f.pending("cache-0-replica-0", f.redis_shard("cache", "replica", "0")),
		f.pod("cache-1-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "1")),
	)) == 0
}

test_redis_slave_alias_is_replica if {
	got := f.separates(
		f.pending("cache-master-0", f.redis("cache", "master")),
		f.pod("cache-slave-0", "shop", "u1", "node-1", f.redis("cache", "slave")),
	)
	got == {{"rule": "redis-master-replica", "reason": "redis: replica {pod} of cluster cache already on this node"}}
	count(f.separates(
		f.pending("cache-slave-1", f.redis("cache", "slave")),
		f.pod("cache-replica-0", "shop", "u1", "node-1", f.redis("cache", "replica")),
	)) == 0
}

# After failover the former replica carries master labels: masters-apart applies.
test_redis_failover_relabel_counts_current_role if {
	peer := f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "master"))
	f.separates(f.pending("cache-master-0", f.redis("cache", "master")), peer) == {{"rule": "redis-masters", "reason": master_reason}}
}

test_one_conflict_per_peer if {
	pending := f.pending("cache-0-master", f.redis_shard("cache", "master", "0"))
	peers := [
		f.pod("cache-1-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "1")),
		f.pod("cache-0-replica-0", "shop", "u2", "node-2", f.redis_shard("cache", "replica", "0")),
		f.pod("cache-0-replica-1", "shop", "u3", "node-2", f.redis_shard("cache", "replica", "0")),
		f.pod("cache-1-replica-0", "shop", "u4", "node-3", f.redis_shard("cache", "replica", "1")),
	]
	{[p.uid, s.rule] | some p in peers; some s in f.separates(pending, p)} == {
		["u1", "redis-masters"],
		["u2", "redis-master-replica"],
		["u3", "redis-master-replica"],
	}
}

# Keys may overlap across entries: same instance name but another workload.
test_other_workload_same_instance_no_conflict if {
	count(f.separates(
		f.pending("cache-0-master", f.redis("cache", "master")),
		f.pod("cache-data-0", "shop", "u1", "node-1", f.es("cache", "master")),
	)) == 0
}

# Claims know neither node nor UID: a pod's claims are the same pending or
# bound, and a master's separate meets its own marks. Leaving out the pod
# itself and unbound peers is regosched's part of the join, not the claims'.
test_self_and_unbound_peers_left_to_regosched if {
	pending := f.pending("cache-0-master", f.redis("cache", "master"))
	itself := f.pod("cache-0-master", "shop", "pending", "node-1", f.redis("cache", "master"))
	unbound := f.pod("cache-1-master", "shop", "u2", "", f.redis("cache", "master"))
	f.claims_of(itself) == f.claims_of(pending)
	f.separates(pending, itself) == {{"rule": "redis-masters", "reason": master_reason}}
	f.separates(pending, unbound) == {{"rule": "redis-masters", "reason": master_reason}}
}

test_es_data_vs_data_conflict if {
	got := f.separates(
		f.pod("es-data-1", "logs", "pending", "", f.es("es", "data")),
		f.pod("es-data-0", "logs", "u1", "node-1", f.es("es", "data")),
	)
	got == {{"rule": "elasticsearch-data", "reason": "elasticsearch: data {pod} of cluster es already on this node"}}
}

test_es_non_data_roles_unconstrained if {
	master := f.pod("es-master-1", "logs", "pending", "", f.es("es", "master"))
	count(f.separates(master, f.pod("es-master-0", "logs", "u1", "node-1", f.es("es", "master")))) == 0
	count(f.separates(master, f.pod("es-data-0", "logs", "u2", "node-1", f.es("es", "data")))) == 0
	count(f.separates(
		f.pod("es-data-1", "logs", "pending", "", f.es("es", "data")),
		f.pod("es-ingest-0", "logs", "u1", "node-1", f.es("es", "ingest")),
	)) == 0
}

test_eck_data_vs_data_conflict if {
	got := f.separates(
		f.pod("quickstart-es-hot-1", "logs", "pending", "", f.eck("quickstart", "true")),
		f.pod("quickstart-es-hot-0", "logs", "u1", "node-1", f.eck("quickstart", "true")),
	)
	got == {{"rule": "elasticsearch-eck-data", "reason": "elasticsearch: data {pod} of cluster quickstart already on this node"}}
}

test_eck_non_data_and_other_cluster_no_conflict if {
	count(f.separates(
		f.pod("quickstart-es-master-1", "logs", "pending", "", f.eck("quickstart", "false")),
		f.pod("quickstart-es-hot-0", "logs", "u1", "node-1", f.eck("quickstart", "true")),
	)) == 0
	count(f.separates(
		f.pod("quickstart-es-hot-1", "logs", "pending", "", f.eck("quickstart", "true")),
		f.pod("other-es-hot-0", "logs", "u1", "node-1", f.eck("other", "true")),
	)) == 0
}

test_unrelated_pods_no_conflict if {
	count(f.separates(
		f.pending("web-0", {"app": "web"}),
		f.pod("web-1", "shop", "u1", "node-1", {"app": "web"}),
	)) == 0
}

# A workload added in data only; "*" peer_role names the peer's roles (or "pod").
kafka_config := {"workloads": {"kafka": {
	"match_labels": {"app": "kafka"},
	"cluster_label": "cluster",
	"roles": {"broker": [{"role": "broker"}]},
	"separate": [{"name": "kafka-apart", "role": "*", "peer_role": "*", "scope": "cluster"}],
}}}

test_user_added_workload_entry if {
	pending := f.pod("k-2", "mq", "pending", "", {"app": "kafka", "cluster": "k", "role": "broker"})
	broker := f.pod("k-0", "mq", "u1", "node-1", {"app": "kafka", "cluster": "k", "role": "broker"})
	other := f.pod("k-zk-0", "mq", "u2", "node-2", {"app": "kafka", "cluster": "k"})
	got_broker := f.separates(pending, broker) with data.regosched.config as kafka_config
	got_broker == {{"rule": "kafka-apart", "reason": "kafka: broker {pod} of cluster k already on this node"}}
	got_other := f.separates(pending, other) with data.regosched.config as kafka_config
	got_other == {{"rule": "kafka-apart", "reason": "kafka: pod {pod} of cluster k already on this node"}}
}

# Go may marshal a nil label map as null: such a pod claims nothing, so it
# is nobody's peer.
test_null_labels_tolerated if {
	peer := f.pod("x", "shop", "u1", "node-1", null)
	f.claims_of(peer) == {"marks": {}, "separate": set(), "spread": set(), "cap": set()}
	count(f.separates(f.pending("cache-0-master", f.redis("cache", "master")), peer)) == 0
}
