# Claims: what a pod is to its peers (marks), whom it must not share a
# node or zone with (separate), how many of its group a zone may hold (cap)
# and whom it should stay apart from (spread), worked out from
# the pod alone. regosched evaluates marks once per bound pod version, and
# separate and spread once per request for the pending pod, then joins them
# in Go: an entry of the pending pod applies to every peer whose marks hold
# its mark, so no Rego runs per peer. The tests state that join on claims
# (fixtures_test.rego: separates and spreads).
#
# The three parts are rules of their own, so that regosched evaluates only
# the part it needs: marks for a bound pod, separate and spread for the
# pending pod. Helpers live in workloads.rego: any rule here is part of the
# data.regosched.claims document.
package regosched.claims

import data.regosched.config
import data.regosched.workloads.mine
import data.regosched.workloads.role_word
import data.regosched.workloads.scopes
import data.regosched.workloads.shard_part
import data.regosched.workloads.topology_key
import data.regosched.workloads.zones

# Mark -> what the pod is, in the words of a denial; regosched puts the
# pod's namespace/name in place of {pod}.
# METADATA
# entrypoint: true
marks[concat("/", [prefix, scope, m[scope], role])] := concat("", [
	m.kind, ": ", role_word(role, m.roles), " {pod} of cluster ", m.cluster,
	shard_part(scope, m.shard), " already on this node",
]) if {
	some name, [prefix, m] in mine
	some scope in mark_scopes(config.workloads[name])
	some role in m.roles
}

# Hard: no peer with the mark on the same node. A shard is a guess until it
# is known: see separate_marks.
# METADATA
# entrypoint: true
separate contains {"mark": mark, "rule": r.name} if {
	some name, [prefix, m] in mine
	some r in object.get(config.workloads[name], "separate", [])
	r.role in m.roles
	some mark in separate_marks(prefix, r, m)
}

# Hard per zone, where the entry's zones are "hard": its zone_separate
# rules, keyed by the zone label. The shard as it is, never widened as
# separate_marks widens it: kept from the zones of every shard's peers, a
# pod whose shard is not read yet could fit in no zone at all. Pods of one
# unknown shard ("", as in a workload of one shard) are kept apart among
# themselves; the audit judges the others once their shard is known.
separate contains {"mark": mark, "rule": r.name, "topology_key": config.zone_label} if {
	some name, [prefix, m] in mine
	zones(config.workloads[name]) == "hard"
	some r in object.get(config.workloads[name], "zone_separate", [])
	r.role in m.roles
	mark := concat("/", [prefix, r.scope, m[r.scope], r.peer_role])
}

# Hard per zone, where the entry's zones are "hard": each quorum rule of
# the pod's role caps the members of that role in one zone to fewer than
# half of the group (size: the rule's, else the members regosched counts,
# or with size_from_statefulsets their StatefulSets' replicas), so that
# the group keeps its majority through the loss of any one zone.
# METADATA
# entrypoint: true
cap contains object.union(
	{
		"mark": concat("/", [prefix, r.scope, m[r.scope], r.role]),
		"rule": r.name,
		"topology_key": config.zone_label,
		"quorum": true,
	},
	object.filter(r, ["size", "size_from_statefulsets"]),
) if {
	some name, [prefix, m] in mine
	zones(config.workloads[name]) == "hard"
	some r in object.get(config.workloads[name], "quorum", [])
	r.role in m.roles
}

# The marks a hard rule keeps the pod from. Within a shard, a pod whose
# shard is unknown ("": not read yet from Redis, or a workload of one shard)
# is kept from the peer role's pods of every shard of its cluster, and a pod
# whose shard is known is also kept from the peer role's pods whose shard is
# unknown: either may turn out to be the other's shard, and a guess never
# loosens a hard rule. A workload of one shard has only "", so nothing
# changes for it.
separate_marks(prefix, r, m) := {concat("/", [prefix, "cluster", m.cluster, r.peer_role])} if {
	r.scope == "shard"
	m.shard == ""
} else := {
	concat("/", [prefix, "shard", m.shard, r.peer_role]),
	concat("/", [prefix, "shard", "", r.peer_role]),
} if {
	r.scope == "shard"
} else := {concat("/", [prefix, r.scope, m[r.scope], r.peer_role])}

# The scopes a pod is marked in: those its entry's rules compare, and the
# cluster wherever they compare shards, for separate_marks.
mark_scopes(entry) := scopes(entry) | {"cluster"} if {
	"shard" in scopes(entry)
} else := scopes(entry)

# Soft: a penalty on the node ("node_spread") or zone ("zone_apart", and
# zone_separate where the entry's zones are "soft") of each peer with the
# mark. Weights come from the rule, else config.weights, else 1.
# METADATA
# entrypoint: true
spread contains {
	"mark": concat("/", [prefix, r.scope, m[r.scope], r.peer_role]),
	"rule": r.name,
	"topology_key": topology_key[weight_kind],
	"weight": object.get(r, "weight", object.get(object.get(config, "weights", {}), weight_kind, 1)),
} if {
	some name, [prefix, m] in mine
	some kind, weight_kind in soft_kinds(config.workloads[name])
	some r in object.get(config.workloads[name], kind, [])
	r.role in m.roles
}

# Rule list -> the soft rule kind whose key and weight it takes.
soft_kinds(entry) := {"node_spread": "node_spread"} if {
	zones(entry) == "off"
} else := {"node_spread": "node_spread", "zone_apart": "zone_apart", "zone_separate": "zone_apart"} if {
	zones(entry) == "soft"
} else := {"node_spread": "node_spread", "zone_apart": "zone_apart"}
