package regosched.filter

# A complete rule with two different values as soon as there is a peer: the
# compiler cannot see it, evaluation fails.
limit := 1 if count(input.peers) > 0

limit := 2 if input.pod.name != ""

conflicts contains {"node": peer.node, "rule": "sample", "reason": "limit", "peer": peer.uid} if {
	some peer in input.peers
	limit > 0
}
