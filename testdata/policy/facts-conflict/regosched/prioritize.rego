package regosched.prioritize

penalties contains {"topology_key": "kubernetes.io/hostname", "value": peer.node, "rule": "sample", "peer": peer.uid} if {
	some peer in input.peers
}
