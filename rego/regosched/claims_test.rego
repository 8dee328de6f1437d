# claims: marks, separate and spread of one pod, and how those of two pods
# meet: regosched applies a separate or spread entry of the pending pod to
# each peer whose marks hold its mark.
package regosched.claims_test

import data.regosched.claims
import data.regosched.fixtures_test as f
import data.regosched.peer_keys

test_redis_master_claims if {
	c := claims with input as {"pod": f.pending("cache-0-master", f.redis_shard("cache", "master", "0"))}
	c.marks == {
		"redis/shop/cache/cluster/cache/*": "redis: master {pod} of cluster cache already on this node",
		"redis/shop/cache/cluster/cache/master": "redis: master {pod} of cluster cache already on this node",
		"redis/shop/cache/shard/0/*": "redis: master {pod} of cluster cache (shard 0) already on this node",
		"redis/shop/cache/shard/0/master": "redis: master {pod} of cluster cache (shard 0) already on this node",
	}
	c.separate == {
		{"mark": "redis/shop/cache/cluster/cache/master", "rule": "redis-masters"},
		{"mark": "redis/shop/cache/shard/0/replica", "rule": "redis-master-replica"},
		# the replicas whose shard is not known yet
		{"mark": "redis/shop/cache/shard//replica", "rule": "redis-master-replica"},
		# and the replicas of its shard, out of its zone
		{"mark": "redis/shop/cache/shard/0/replica", "rule": "redis-master-replica-zones", "topology_key": "topology.kubernetes.io/zone"},
	}
	c.spread == {
		{"mark": "redis/shop/cache/cluster/cache/*", "rule": "redis-node-spread", "topology_key": "kubernetes.io/hostname", "weight": 1},
		{"mark": "redis/shop/cache/shard/0/*", "rule": "redis-shard-zones", "topology_key": "topology.kubernetes.io/zone", "weight": 2},
	}
}

# A replica avoids only the master of its own shard.
test_redis_replica_separate if {
	c := claims with input as {"pod": f.pending("cache-0-replica", f.redis_shard("cache", "replica", "0"))}
	c.separate == {
		{"mark": "redis/shop/cache/shard/0/master", "rule": "redis-master-replica"},
		{"mark": "redis/shop/cache/shard//master", "rule": "redis-master-replica"},
		{"mark": "redis/shop/cache/shard/0/master", "rule": "redis-master-replica-zones", "topology_key": "topology.kubernetes.io/zone"},
	}
}

# A replica whose shard is unknown avoids every master of its cluster's
# nodes, and only the zones of the masters whose shard is unknown too: kept
# out of every master's zone, it could fit in none.
test_redis_replica_of_unknown_shard_separate if {
	c := claims with input as {"pod": f.pending("cache-replica-0", f.redis("cache", "replica"))}
	c.separate == {
		{"mark": "redis/shop/cache/cluster/cache/master", "rule": "redis-master-replica"},
		{"mark": "redis/shop/cache/shard//master", "rule": "redis-master-replica-zones", "topology_key": "topology.kubernetes.io/zone"},
	}
}

# zones: hard keeps a master and its shard's replicas apart per zone, soft
# makes that a penalty of zone_apart's weight, off drops every zone rule.
test_zones_modes if {
	master := f.pending("cache-0-master", f.redis_shard("cache", "master", "0"))
	zone_rules(master, "hard") == {["separate", "redis-master-replica-zones"], ["spread", "redis-shard-zones"]}
	zone_rules(master, "soft") == {["spread", "redis-master-replica-zones"], ["spread", "redis-shard-zones"]}
	zone_rules(master, "off") == set()
}

zone_rules(pod, mode) := {[part, e.rule] |
	c := claims with data.regosched.config.workloads.redis.zones as mode with input as {"pod": pod}
	some part in ["separate", "spread"]
	some e in c[part]
	e.topology_key == "topology.kubernetes.io/zone"
}

test_unrelated_pod_claims_nothing if {
	claims == {"marks": {}, "separate": set(), "spread": set(), "cap": set()} with input as {"pod": f.pending("web-0", {"app": "web"})}
}

# A rule's own weight wins over config.weights; without either, 1.
test_spread_weights if {
	cfg := {"hostname_key": "kubernetes.io/hostname", "zone_label": "zone", "workloads": {"w": {
		"cluster_label": "c",
		"node_spread": [{"name": "own", "role": "*", "peer_role": "*", "scope": "cluster", "weight": 5}],
		"zone_apart": [{"name": "default", "role": "*", "peer_role": "*", "scope": "cluster"}],
	}}}
	c := claims with data.regosched.config as cfg with input as {"pod": f.pod("p", "ns", "p", "", {"c": "x"})}
	{[s.rule, s.weight] | some s in c.spread} == {["own", 5], ["default", 1]}
}

# Peer roles and scope (cluster / shard fact) decide; an unknown scope never applies.
test_peer_role_and_scope_decide if {
	cfg := {"workloads": {"w": {
		"cluster_label": "c",
		"shard_label": "s",
		"roles": {"a": [{"r": "a"}]},
		"separate": [
			{"name": "shard-a", "role": "*", "peer_role": "a", "scope": "shard"},
			{"name": "any-rack", "role": "*", "peer_role": "*", "scope": "rack"},
		],
	}}}
	pending := f.pod("p", "ns", "p", "", {"c": "x", "s": "1"})
	peers := [
		f.pod("p1", "ns", "u1", "n1", {"c": "x", "s": "1", "r": "a"}),
		f.pod("p2", "ns", "u2", "n1", {"c": "x", "s": "2", "r": "a"}),
		f.pod("p3", "ns", "u3", "n1", {"c": "x", "s": "1"}),
	]
	got := {[p.uid, s.rule] | some p in peers; some s in f.separates(pending, p)} with data.regosched.config as cfg
	got == {["u1", "shard-a"]}
}

# Marks meet only within one namespace, cluster and workload entry. The
# unbound peer and the pending pod itself meet as any bound master does:
# regosched, not the claims, leaves them out.
test_marks_meet_within_namespace_cluster_and_workload if {
	pending := f.pending("m", f.redis("cache", "master"))
	apart := [
		f.pod("b", "shop", "u2", "node-1", f.redis("other", "master")),
		f.pod("c", "ops", "u3", "node-1", f.redis("cache", "master")),
		f.pod("e", "shop", "u5", "node-1", f.es("cache", "data")),
	]
	every p in apart {
		count(f.separates(pending, p)) == 0
	}
	met := f.separates(pending, f.pod("a", "shop", "u1", "node-1", f.redis("cache", "master")))
	met == {{"rule": "redis-masters", "reason": "redis: master {pod} of cluster cache already on this node"}}
	f.separates(pending, f.pod("d", "shop", "u4", "", f.redis("cache", "master"))) == met
	f.separates(pending, f.pod("m", "shop", "pending", "node-1", f.redis("cache", "master"))) == met
}

# Pods of the shipped presets, pending or bound, with and without roles.
sample_pods := [
	f.pending("cache-0-master", f.redis_shard("cache", "master", "0")),
	f.pod("cache-0-replica", "shop", "u1", "node-1", f.redis_shard("cache", "replica", "0")),
	f.pod("cache-replicas-0", "shop", "u2", "node-1", f.redis("cache", "slave")),
	f.pending("cache-0", f.redis("cache", "sentinel")),
	f.pod("es-data-0", "logs", "u3", "node-2", f.es("es", "data")),
	f.pod("qs-es-0", "logs", "u4", "node-2", f.eck("qs", "true")),
	f.pod("x", "logs", "u5", "node-3", object.union(f.es("es", "data"), f.eck("qs", "true"))),
	f.pod("cache-node-0", "shop", "u6", "node-3", {
		"app.kubernetes.io/name": "redis",
		"app.kubernetes.io/instance": "cache",
		"app.kubernetes.io/component": "node",
		"statefulset.kubernetes.io/pod-name": "cache-node-0",
	}),
]

# regosched compares a pod only with the pods that share one of its
# peer_keys: every mark a pod holds or looks for lies under one of them.
test_marks_lie_under_peer_keys if {
	every pod in sample_pods {
		keys := peer_keys with input as {"pod": pod}
		c := f.claims_of(pod)
		count(c.marks) > 0
		every mark in array.concat(
			[m | some m, _ in c.marks],
			[s.mark | some s in (c.separate | c.spread)],
		) {
			some key in keys
			startswith(mark, concat("", [key, "/"]))
		}
	}
}

# regosched replaces the first {pod} of a description with the peer's
# namespace/name: every description names the pod once.
test_descriptions_name_the_pod_once if {
	every pod in sample_pods {
		every what in f.claims_of(pod).marks {
			count(indexof_n(what, "{pod}")) == 1
		}
	}
}

# A master of a Redis Cluster is capped per zone by the quorum rule, which
# names its own role's mark: regosched counts the masters per zone.
test_redis_master_quorum if {
	c := claims with input as {"pod": f.pending("cache-0-master", f.redis_shard("cache", "master", "0"))}
	c.cap == {{
		"mark": "redis/shop/cache/cluster/cache/master",
		"rule": "redis-masters-quorum",
		"topology_key": "topology.kubernetes.io/zone",
		"quorum": true,
	}}
	replica := claims with input as {"pod": f.pending("cache-0-replica", f.redis_shard("cache", "replica", "0"))}
	replica.cap == set()
}

# A quorum rule's size is passed on; zones other than hard drop the cap.
test_quorum_size_and_zones if {
	master := f.pending("es-master-0", f.es("logs", "master"))
	sized := claims with data.regosched.config.workloads.elasticsearch.quorum as [{"name": "q", "role": "master", "scope": "cluster", "size": 5}]
		with input as {"pod": master}
	[e.size | some e in sized.cap] == [5]
	soft := claims with data.regosched.config.workloads.elasticsearch.zones as "soft" with input as {"pod": master}
	soft.cap == set()
}
