package regosched.filter

conflicts contains {"node": peer.node, "rule": "sample", "reason": "same cluster", "peer": peer.uid} if {
	some peer in input.peers
}
