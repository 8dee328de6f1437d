# Membership facts (cluster, shard, roles) and rule selection from labels and data.
package regosched.workloads_test

import data.regosched.fixtures_test as f
import data.regosched.workloads

test_redis_member_facts if {
	workloads.entries(f.pending("c", f.redis_shard("cache", "slave", "2"))) == {"redis": {
		"kind": "redis",
		"cluster": "cache",
		"shard": "2",
		"roles": {"*", "replica"},
	}}
}

test_single_shard_and_no_role if {
	workloads.entries(f.pending("c", f.redis("cache", "sentinel"))) == {"redis": {
		"kind": "redis",
		"cluster": "cache",
		"shard": "",
		"roles": {"*"},
	}}
}

test_eck_kind_and_roles if {
	m := workloads.member(f.pod("qs-0", "logs", "u", "", f.eck("qs", "true")), "elasticsearch-eck")
	m.kind == "elasticsearch"
	m.roles == {"*", "data"}
	m.shard == ""
	not workloads.member(f.pod("qs-0", "logs", "u", "", f.eck("qs", "true")), "redis")
}

test_kind_defaults_to_entry_name if {
	cfg := {"workloads": {"kafka": {"match_labels": {"app": "kafka"}, "cluster_label": "c"}}}
	m := workloads.member(f.pod("k", "mq", "u", "", {"app": "kafka", "c": "k"}), "kafka") with data.regosched.config as cfg
	m.kind == "kafka"
	m.roles == {"*"}
}

test_pod_rules_keep_rules_for_pod_role if {
	rules := workloads.pod_rules with input as {"pod": f.pending("m", f.redis("cache", "master"))}
	{r.peer_role | some r in rules.redis.separate} == {"master", "replica"}
	count(rules.redis.node_spread) == 1
	rules_r := workloads.pod_rules with input as {"pod": f.pending("r", f.redis("cache", "replica"))}
	[r.peer_role | some r in rules_r.redis.separate] == ["master"]
}

# Peer roles and scope (cluster / shard fact) decide; an unknown scope never applies.
test_applying_checks_peer_role_and_scope if {
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
	got := workloads.applying("separate") with data.regosched.config as cfg
		with input as {"pod": f.pod("p", "ns", "p", "", {"c": "x", "s": "1"}), "peers": peers}
	[[peer.uid, rule.name] | some [peer, rule, _] in got] == [["u1", "shard-a"]]
}

test_peers_only_same_namespace_cluster_bound_others if {
	peers := [
		f.pod("a", "shop", "u1", "node-1", f.redis("cache", "replica")),
		f.pod("b", "shop", "u2", "node-1", f.redis("other", "replica")),
		f.pod("c", "ops", "u3", "node-1", f.redis("cache", "replica")),
		f.pod("d", "shop", "u4", "", f.redis("cache", "replica")),
		f.pod("m", "shop", "pending", "node-1", f.redis("cache", "master")),
		f.pod("e", "shop", "u5", "node-1", f.es("cache", "data")),
	]
	got := workloads.peers with input as {"pod": f.pending("m", f.redis("cache", "master")), "peers": peers}
	[[peer.uid, name] | some [peer, name, _] in got] == [["u1", "redis"]]
}

# Facts given with a pod (pod.facts) are used instead of its labels: here
# they say master where the labels say replica (as after a failover the
# informer has not yet reported), and the answer follows the facts.
test_given_facts_win_over_labels if {
	master_facts := {"redis": {"kind": "redis", "cluster": "cache", "shard": "", "roles": {"*", "master"}}}
	peer := object.union(f.pod("a", "shop", "u1", "node-1", f.redis("cache", "replica")), {"facts": master_facts})
	pod := object.union(f.pending("m", {}), {"facts": master_facts})
	got := workloads.applying("separate") with input as {"pod": pod, "peers": [peer]}
	[[p.uid, rule.name] | some [p, rule, _] in got] == [["u1", "redis-masters"]]
}

# Peers with and without facts mix: each is judged from what it carries.
test_peers_with_and_without_facts if {
	labels := f.redis("cache", "replica")
	described := object.union(f.pod("a", "shop", "u1", "node-1", labels), {"facts": workloads.entries({"labels": labels})})
	plain := f.pod("b", "shop", "u2", "node-2", labels)
	got := workloads.peers with input as {"pod": f.pending("m", f.redis("cache", "master")), "peers": [described, plain]}
	[[p.uid, name, theirs.roles] | some [p, name, theirs] in got] == [["u1", "redis", {"*", "replica"}], ["u2", "redis", {"*", "replica"}]]
}
