package regosched.filter

# A conflict must name the node it forbids; this one names only the peer.
conflicts contains {"rule": "sample", "reason": "same instance", "peer": peer.uid} if {
	some peer in input.peers
}
