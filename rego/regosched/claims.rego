# Claims: what a pod is to its peers (marks) and whom it must not share a
# node with (separate) or should stay apart from (spread), worked out from
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

# Soft: a penalty on the node ("node_spread") or zone ("zone_apart") of each
# peer with the mark. Weights come from the rule, else config.weights, else 1.
# METADATA
# entrypoint: true
spread contains {
	"mark": concat("/", [prefix, r.scope, m[r.scope], r.peer_role]),
	"rule": r.name,
	"topology_key": topology_key[kind],
	"weight": object.get(r, "weight", object.get(object.get(config, "weights", {}), kind, 1)),
} if {
	some name, [prefix, m] in mine
	some kind, _ in topology_key
	some r in object.get(config.workloads[name], kind, [])
	r.role in m.roles
}
