package regosched.filter

conflicts contains {"node": peer.node, "rule": "sample", "reason": "same instance", "peer": peer.uid} if {
	some peer in input.peers
	peer.labels["app.kubernetes.io/instance"] == input.pod.labels["app.kubernetes.io/instance"]
}
