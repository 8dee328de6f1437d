package regosched.prioritize

# Weights must be non-negative numbers.
penalties contains {"topology_key": "kubernetes.io/hostname", "value": peer.node, "weight": -1, "rule": "sample", "peer": peer.uid} if {
	some peer in input.peers
}
