# The configuration check: the shipped data passes, and each kind of mistake
# an author makes is named.
package regosched.validate_test

import data.regosched.validate

base := {
	"hostname_key": "kubernetes.io/hostname",
	"zone_label": "topology.kubernetes.io/zone",
	"workloads": {"redis": {
		"match_labels": {"app": "redis"},
		"cluster_label": "instance",
		"roles": {"master": [{"role": "master"}], "replica": [{"role": "replica"}]},
		"separate": [{"name": "masters", "role": "master", "peer_role": "master", "scope": "cluster"}],
	}},
}

test_shipped_config_is_valid if {
	count(validate.errors) == 0
}

test_base_is_valid if {
	count(validate.errors) == 0 with data.regosched.config as base
}

# base with its one workload replaced by entry.
with_redis(entry) := object.union(object.remove(base, ["workloads"]), {"workloads": {"redis": entry}})

cases := {
	"unknown top-level key": {
		"config": object.union(base, {"zone_lable": "x"}),
		"want": "data.regosched.config: (Root): Additional property zone_lable is not allowed",
	},
	"unknown workload key": {
		"config": with_redis(object.union(base.workloads.redis, {"shard_lable": "s"})),
		"want": "data.regosched.config: workloads.redis: Additional property shard_lable is not allowed",
	},
	"misspelt scope": {
		"config": with_redis(object.union(base.workloads.redis, {"separate": [{"name": "m", "role": "master", "peer_role": "master", "scope": "clsuter"}]})),
		"want": "data.regosched.config: workloads.redis.separate.0.scope: workloads.redis.separate.0.scope must be one of the following: \"cluster\", \"shard\"",
	},
	"misspelt role": {
		"config": with_redis(object.union(base.workloads.redis, {"separate": [{"name": "m", "role": "master", "peer_role": "mastre", "scope": "cluster"}]})),
		"want": "data.regosched.config.workloads.redis.separate[0]: peer_role \"mastre\" is not a role of the workload (roles: *, master, replica)",
	},
	"protected role not defined": {
		"config": with_redis(object.union(base.workloads.redis, {"protected_roles": ["leader"]})),
		"want": "data.regosched.config.workloads.redis.protected_roles[0]: \"leader\" is not a role of the workload (roles: *, master, replica)",
	},
	"live roles without replica": {
		"config": with_redis(object.union(object.remove(base.workloads.redis, ["roles"]), {
			"live_roles": {"source": "redis"},
			"roles": {"master": [{"role": "master"}]},
		})),
		"want": "data.regosched.config.workloads.redis.live_roles: the workload must define role \"replica\", which live roles write",
	},
	"unknown role shadows a role": {
		"config": with_redis(object.union(base.workloads.redis, {"unknown_role": "master"})),
		"want": "data.regosched.config.workloads.redis.unknown_role: \"master\" is also a role with labels; an unknown role must be a name of its own",
	},
	"negative weight": {
		"config": object.union(base, {"weights": {"node_spread": -1}}),
		"want": "data.regosched.config: weights.node_spread: Must be greater than or equal to 0",
	},
}

test_mistakes_are_named if {
	every _, c in cases {
		some msg in validate.errors with data.regosched.config as c.config
		msg == c.want
	}
}

# A rule naming the unknown role is valid: the role exists for pods no label names.
test_unknown_role_may_be_named if {
	cfg := with_redis(object.union(base.workloads.redis, {
		"unknown_role": "unknown",
		"separate": [{"name": "u", "role": "unknown", "peer_role": "*", "scope": "cluster"}],
	}))
	count(validate.errors) == 0 with data.regosched.config as cfg
}
