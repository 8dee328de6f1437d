# METADATA
# title: Workload membership helpers
# description: >-
#   Decide from labels alone which workload entries of data.regosched.config a
#   pod belongs to (cluster, shard, roles) and which data rules apply between
#   input.pod and each input peer. No label name is hard-coded here.
package regosched.workloads

import data.regosched.config

# Rule lists an entry may carry; each rule is {name, role, peer_role, scope}.
rule_kinds := ["separate", "zone_separate", "node_spread", "zone_apart"]

# How an entry's zone rules apply: "hard" (zone_separate kept apart per
# zone), "soft" (zone_separate as penalties) or "off" (no zone rule, not
# even zone_apart); the config's zones, else hard.
zones(entry) := object.get(entry, "zones", object.get(config, "zones", "hard"))

# Entry name -> facts about pod as a member of that entry, for every entry
# the pod belongs to (selected, with a non-empty cluster label). No shard:
# one shard "". A rule's scope names the fact that must be equal ("cluster"
# or "shard"). Every member has role "*", so rule roles need one look-up.
entries(pod) := {name: {
	"kind": object.get(entry, "kind", name),
	"cluster": cluster,
	"shard": shard_of(entry, pod.labels),
	"roles": ({"*"} | roles_of(entry, pod.labels)),
} |
	some name, entry in config.workloads
	cluster := pod.labels[entry.cluster_label] # first: undefined for null labels
	cluster != ""

	# All match_labels equal and all match_exists present.
	object.subset(pod.labels, object.get(entry, "match_labels", {}))
	exists := object.get(entry, "match_exists", [])
	count(object.filter(pod.labels, exists)) == count(exists)
}

# The labels regosched writes with the roles it reads from the software
# itself (--redis-roles); they name the role and shard now, where a chart's
# labels may name those of the pod's first start.
live_labels := object.get(config, "live_labels", {"role": "regosched.io/role", "shard": "regosched.io/shard"})

# A pod's roles in entry: the live role where the entry reads roles live and
# the label names one of its roles; else every role one of whose label sets
# the pod has all labels of; else the entry's unknown_role, if any.
roles_of(entry, labels) := {role} if {
	entry.live_roles
	role := labels[live_labels.role]
	entry.roles[role]
} else := matched if {
	matched := {role |
		some role, sets in object.get(entry, "roles", {})
		some set in sets
		object.subset(labels, set)
	}
	count(matched) > 0
} else := {entry.unknown_role} if {
	entry.unknown_role
} else := set()

# A pod's shard in entry: the live shard where the entry reads roles live
# and the pod has one, else the value of the entry's shard_label.
shard_of(entry, labels) := labels[live_labels.shard] if {
	entry.live_roles
	labels[live_labels.shard] != ""
} else := object.get(labels, object.get(entry, "shard_label", ""), "")

pod_entries := entries(input.pod)

# Helpers of claims.rego.

# Entry name -> [mark prefix, member facts], for each entry of the pod. A
# mark names (entry, namespace, cluster, scope fact, its value, role): two
# pods share one when they are of one entry, namespace and cluster, with the
# role and the same value of the scope fact. Label values, namespaces and
# entry names never hold "/"; a missing fact (unknown scope) gives no mark.
# (concat, not a helper function: a call costs more than the concat.)
mine := {name: [concat("/", [name, input.pod.namespace, m.cluster]), m] | some name, m in pod_entries}

# The scope facts the rules of an entry compare (quorum rules too).
scopes(entry) := {r.scope |
	some kind in array.concat(rule_kinds, ["quorum"])
	some r in object.get(entry, kind, [])
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
