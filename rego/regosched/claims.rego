# Claims: what a pod is to its peers (marks) and whom it must not share a
# node with (separate) or should stay apart from (spread), worked out from
# the pod alone. regosched evaluates claims once per bound pod version and once per
# request for the pending pod, then joins them in Go: an entry of the
# pending pod applies to every peer whose marks hold its mark, so no Rego
# runs per peer. The join, in Rego, is data.regosched.join.
package regosched

import data.regosched.config
import data.regosched.workloads

# METADATA
# entrypoint: true
# description: >-
#   Evaluated with peer_keys (input {pod}); regosched keeps the answer for
#   each bound pod and joins it with the pending pod's.
claims := {
	"marks": marks,
	"separate": separate,
	"spread": spread,
}

# Entry name -> [mark prefix, member facts], for each entry of the pod. A
# mark names (entry, namespace, cluster, scope fact, its value, role): two
# pods share one when they are of one entry, namespace and cluster, with the
# role and the same value of the scope fact. Label values, namespaces and
# entry names never hold "/"; a missing fact (unknown scope) gives no mark.
# (concat, not a helper function: a call costs more than the concat.)
mine := {name: [concat("/", [name, input.pod.namespace, m.cluster]), m] | some name, m in workloads.pod_entries}

# The scope facts the rules of an entry compare.
scopes(entry) := {r.scope |
	some kind in workloads.rule_kinds
	some r in object.get(entry, kind, [])
}

# Mark -> what the pod is, in the words of a denial; regosched puts the
# pod's namespace/name in place of {pod}.
marks[concat("/", [prefix, scope, m[scope], role])] := concat("", [
	m.kind, ": ", role_word(role, m.roles), " {pod} of cluster ", m.cluster,
	shard_part(scope, m.shard), " already on this node",
]) if {
	some name, [prefix, m] in mine
	some scope in scopes(config.workloads[name])
	some role in m.roles
}

# Hard: no peer with the mark on the same node.
separate contains {"mark": concat("/", [prefix, r.scope, m[r.scope], r.peer_role]), "rule": r.name} if {
	some name, [prefix, m] in mine
	some r in object.get(config.workloads[name], "separate", [])
	r.role in m.roles
}

# Soft: a penalty on the node ("node_spread") or zone ("zone_apart") of each
# peer with the mark. Weights come from the rule, else config.weights, else 1.
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

topology_key := {"node_spread": config.hostname_key, "zone_apart": config.zone_label}

# The peer's role as named by the rule; for "*" the peer's actual roles.
role_word(role, roles) := role if {
	role != "*"
} else := concat("/", roles - {"*"}) if {
	count(roles) > 1
} else := "pod"

shard_part(scope, shard) := sprintf(" (shard %s)", [shard]) if {
	scope == "shard"
	shard != ""
} else := ""
