# claims: marks, separate and spread of one pod, and the join (data.regosched.join)
# that regosched computes from them in Go.
package regosched.claims_test

import data.regosched.claims
import data.regosched.fixtures_test as f
import data.regosched.join

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
	}
	c.spread == {
		{"mark": "redis/shop/cache/cluster/cache/*", "rule": "redis-node-spread", "topology_key": "kubernetes.io/hostname", "weight": 1},
		{"mark": "redis/shop/cache/shard/0/*", "rule": "redis-shard-zones", "topology_key": "topology.kubernetes.io/zone", "weight": 2},
	}
}

# A replica avoids only the master of its own shard.
test_redis_replica_separate if {
	c := claims with input as {"pod": f.pending("cache-0-replica", f.redis_shard("cache", "replica", "0"))}
	c.separate == {{"mark": "redis/shop/cache/shard/0/master", "rule": "redis-master-replica"}}
}

test_unrelated_pod_claims_nothing if {
	claims == {"marks": {}, "separate": set(), "spread": set()} with input as {"pod": f.pending("web-0", {"app": "web"})}
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
test_join_checks_peer_role_and_scope if {
	cfg := {"workloads": {"w": {
		"cluster_label": "c",
		"shard_label": "s",
		"roles": {"a": [{"r": "a"}]},
		"separate": [
			{"name": "shard-a", "role": "*", "peer_role": "a", "scope": "shard"},
			{"name": "any-rack", "role": "*", "peer_role": "*", "scope": "rack"},
		],
	}}}
	peers := [
		f.pod("p1", "ns", "u1", "n1", {"c": "x", "s": "1", "r": "a"}),
		f.pod("p2", "ns", "u2", "n1", {"c": "x", "s": "2", "r": "a"}),
		f.pod("p3", "ns", "u3", "n1", {"c": "x", "s": "1"}),
	]
	got := join.conflicts with data.regosched.config as cfg
		with input as {"pod": f.pod("p", "ns", "p", "", {"c": "x", "s": "1"}), "peers": peers}
	{[c.peer, c.rule] | some c in got} == {["u1", "shard-a"]}
}

# Only bound peers of the same namespace and cluster, other than the pod itself.
test_join_only_same_namespace_cluster_bound_others if {
	peers := [
		f.pod("a", "shop", "u1", "node-1", f.redis("cache", "master")),
		f.pod("b", "shop", "u2", "node-1", f.redis("other", "master")),
		f.pod("c", "ops", "u3", "node-1", f.redis("cache", "master")),
		f.pod("d", "shop", "u4", "", f.redis("cache", "master")),
		f.pod("m", "shop", "pending", "node-1", f.redis("cache", "master")),
		f.pod("e", "shop", "u5", "node-1", f.es("cache", "data")),
	]
	got := join.conflicts with input as {"pod": f.pending("m", f.redis("cache", "master")), "peers": peers}
	{c.peer | some c in got} == {"u1"}
}
