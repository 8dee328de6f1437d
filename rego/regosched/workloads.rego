# METADATA
# title: Workload membership helpers
# description: >-
#   Decide from labels alone which workload entries of data.regosched.config a
#   pod belongs to (cluster, shard, roles) and which data rules apply between
#   input.pod and each input peer. No label name is hard-coded here.
package regosched.workloads

import data.regosched.config

# Rule lists an entry may carry; each rule is {name, role, peer_role, scope}.
rule_kinds := ["separate", "node_spread", "zone_apart"]

# All match_labels equal and all match_exists present (builtins: cheap per peer).
matches(labels, entry) if {
	object.subset(labels, object.get(entry, "match_labels", {}))
	exists := object.get(entry, "match_exists", [])
	count(object.filter(labels, exists)) == count(exists)
}

# A pod has a role when all labels of any of the role's label sets match.
# Every member has "*", so rule roles are checked with a single lookup.
roles(labels, entry) := {"*"} | {role |
	some role, sets in object.get(entry, "roles", {})
	some set in sets
	object.subset(labels, set)
}

# Facts about pod as a member of entry name; undefined when not a member
# (not selected, or no non-empty cluster label). No shard_label: one shard "".
# A rule's scope names the fact that must be equal ("cluster" or "shard").
member(pod, name) := {
	"kind": object.get(entry, "kind", name),
	"cluster": cluster,
	"shard": object.get(pod.labels, object.get(entry, "shard_label", ""), ""),
	"roles": roles(pod.labels, entry),
} if {
	entry := config.workloads[name]
	cluster := pod.labels[entry.cluster_label] # first: undefined for null labels
	cluster != ""
	matches(pod.labels, entry)
}

# Entry name -> member facts, for every entry the pod belongs to.
entries(pod) := {name: m |
	some name, _ in config.workloads
	m := member(pod, name)
}

pod_entries := entries(input.pod)
