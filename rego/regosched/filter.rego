# METADATA
# title: Hard anti-affinity
# description: >-
#   One conflict per peer that must not share a node with input.pod, per the
#   "separate" rules of each workload entry. Go turns conflicts into failed
#   nodes and decides whether preemption helps.
package regosched.filter

import data.regosched.workloads

# METADATA
# entrypoint: true
conflicts contains {
	"node": peer.node,
	"rule": rule.name,
	"reason": reason(peer, rule, theirs),
	"peer": peer.uid,
} if {
	some [peer, rule, theirs] in workloads.applying("separate")
}

reason(peer, rule, theirs) := sprintf("%s: %s %s/%s of cluster %s%s already on this node", [
	theirs.kind,
	role_word(rule.peer_role, theirs.roles),
	peer.namespace,
	peer.name,
	theirs.cluster,
	shard_part(rule.scope, theirs.shard),
])

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
