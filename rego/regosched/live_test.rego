# Which pods regosched asks for their live role, and where.
package regosched.live_test

import data.regosched.fixtures_test as f
import data.regosched.live

cfg := {"hostname_key": "h", "zone_label": "z", "workloads": {
	"rc": {
		"kind": "redis",
		"match_labels": {"app": "redis-cluster"},
		"cluster_label": "instance",
		"roles": {"master": [{"role": "master"}], "replica": [{"role": "replica"}]},
		"live_roles": {"source": "redis", "port": 7000},
	},
	"plain": {"match_labels": {"app": "redis-cluster"}, "cluster_label": "instance"},
}}

test_live_roles_of_a_member if {
	live.roles == {{"workload": "rc", "source": "redis", "port_names": ["redis", "tcp-redis"], "port": 7000}} with input as {"pod": f.pending("rc-0", {"app": "redis-cluster", "instance": "x"})}
		with data.regosched.config as cfg
}

test_no_live_roles_for_others if {
	count(live.roles) == 0 with input as {"pod": f.pending("web-0", {"app": "web", "instance": "x"})}
		with data.regosched.config as cfg
}

test_live_label_wins_over_chart_labels if {
	pod := f.pending("rc-0", {"app": "redis-cluster", "instance": "x", "role": "master", "regosched.io/role": "replica", "regosched.io/shard": "slot-0"})
	entries := data.regosched.workloads.entries(pod) with data.regosched.config as cfg
	entries.rc.roles == {"*", "replica"}
	entries.rc.shard == "slot-0"

	# An entry that does not read roles live keeps to the chart's labels.
	entries.plain.roles == {"*"}
	entries.plain.shard == ""
}

test_default_live_labels if {
	live.labels == {"role": "regosched.io/role", "shard": "regosched.io/shard"} with data.regosched.config as cfg
}
