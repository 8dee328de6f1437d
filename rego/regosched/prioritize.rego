# METADATA
# title: Soft anti-affinity
# description: >-
#   Penalties Go sums per candidate node: "node_spread" rules penalise the
#   peer's node, "zone_apart" rules the peer's zone (when its node has one).
#   Weights come from data (config.weights, or a rule's own "weight").
package regosched.prioritize

import data.regosched.config
import data.regosched.workloads

# METADATA
# entrypoint: true
# scope: document
penalties contains penalty(config.hostname_key, peer.node, rule, "node_spread", peer.uid) if {
	some [peer, rule, _] in workloads.applying("node_spread")
}

penalties contains penalty(config.zone_label, zone, rule, "zone_apart", peer.uid) if {
	some [peer, rule, _] in workloads.applying("zone_apart")
	zone := input.nodes[peer.node].labels[config.zone_label]
	zone != ""
}

penalty(key, value, rule, kind, uid) := {
	"topology_key": key,
	"value": value,
	"weight": object.get(rule, "weight", object.get(object.get(config, "weights", {}), kind, 1)),
	"rule": rule.name,
	"peer": uid,
}
