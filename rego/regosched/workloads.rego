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

# Entry name -> member facts of a pod: the facts regosched passes in pod.facts
# (what data.regosched.facts answered for this very pod under this policy,
# computed once per pod version rather than per request), else worked out
# from the labels.
facts_of(pod) := f if {
	f := pod.facts
} else := entries(pod)

pod_entries := facts_of(input.pod)

# Entry name -> rule kind -> rules whose "role" input.pod has.
pod_rules := {name: {kind: rules |
	some kind in rule_kinds
	rules := [r | some r in object.get(config.workloads[name], kind, []); r.role in m.roles]
} |
	some name, m in pod_entries
}

# [peer, entry name, peer facts] per input peer that is another bound pod of
# the same entry, namespace and cluster. Only input.peers is walked.
peers := [[peer, name, theirs] |
	some peer in input.peers
	peer.namespace == input.pod.namespace
	peer.node != ""
	peer.uid != input.pod.uid
	known := facts_of(peer)
	some name, mine in pod_entries
	theirs := known[name]
	theirs.cluster == mine.cluster
]

# [peer, rule, peer facts] for each rule of kind that holds between input.pod
# and a peer: O(peers x rules).
applying(kind) := [[peer, rule, theirs] |
	some [peer, name, theirs] in peers
	some rule in pod_rules[name][kind]
	rule.peer_role in theirs.roles
	pod_entries[name][rule.scope] == theirs[rule.scope]
]
