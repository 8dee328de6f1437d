package regosched

# The closing brace of the rule body is missing.
peer_keys contains key if {
	key := input.pod.labels["app.kubernetes.io/instance"]
