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
	m := workloads.entries(f.pod("qs-0", "logs", "u", "", f.eck("qs", "true")))["elasticsearch-eck"]
	m.kind == "elasticsearch"
	m.roles == {"*", "data"}
	m.shard == ""
	not workloads.entries(f.pod("qs-0", "logs", "u", "", f.eck("qs", "true"))).redis
}

test_kind_defaults_to_entry_name if {
	cfg := {"workloads": {"kafka": {"match_labels": {"app": "kafka"}, "cluster_label": "c"}}}
	m := workloads.entries(f.pod("k", "mq", "u", "", {"app": "kafka", "c": "k"})).kafka with data.regosched.config as cfg
	m.kind == "kafka"
	m.roles == {"*"}
}
