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
penalties contains {
	"topology_key": config.hostname_key,
	"value": peer.node,
	"weight": object.get(rule, "weight", default_weight.node_spread),
	"rule": rule.name,
	"peer": peer.uid,
} if {
	some [peer, rule, _] in workloads.applying("node_spread")
}

penalties contains {
	"topology_key": config.zone_label,
	"value": zone,
	"weight": object.get(rule, "weight", default_weight.zone_apart),
	"rule": rule.name,
	"peer": peer.uid,
} if {
	some [peer, rule, _] in workloads.applying("zone_apart")
	zone := input.nodes[peer.node].labels[config.zone_label]
	zone != ""
}

# Weight of a rule without its own: config.weights, else 1; for the soft
# kinds only (over workloads.rule_kinds, "separate" too: +2% per evaluation,
# BenchmarkJudge). Objects are
# built in the rule heads rather than by a helper function: a function call
# per penalty costs more than the rest of the penalty.
default_weight := {kind: object.get(object.get(config, "weights", {}), kind, 1) | some kind in ["node_spread", "zone_apart"]}
