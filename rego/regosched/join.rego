# METADATA
# title: The join of claims
# description: >-
#   What regosched computes in Go from claims, written in Rego for opa test
#   and opa eval: input {pod, peers, nodes} as for the conflicts and
#   penalties rules. Not an entry point: regosched never evaluates it.
package regosched.join

# The claims of a pod, as regosched computes them (once per pod version).
claims_of(pod) := c if {
	c := data.regosched.claims with input as {"pod": pod}
}

mine := claims_of(input.pod)

# Bound peers other than the pod itself, each with its claims.
peers := [[peer, claims_of(peer)] |
	some peer in input.peers
	peer.node != ""
	peer.uid != input.pod.uid
]

conflicts contains {
	"node": peer.node,
	"rule": s.rule,
	"reason": replace(what, "{pod}", sprintf("%s/%s", [peer.namespace, peer.name])),
	"peer": peer.uid,
} if {
	some s in mine.separate
	some [peer, theirs] in peers
	what := theirs.marks[s.mark]
}

penalties contains {
	"topology_key": s.topology_key,
	"value": value,
	"weight": s.weight,
	"rule": s.rule,
	"peer": peer.uid,
} if {
	some s in mine.spread
	some [peer, theirs] in peers
	theirs.marks[s.mark]
	value := domain(peer.node, s.topology_key)
}

# The peer's topology domain: its node for kubernetes.io/hostname, else the
# value of its node's label (no penalty without one).
domain(node, key) := node if {
	key == "kubernetes.io/hostname"
} else := value if {
	value := input.nodes[node].labels[key]
	value != ""
}
