package regosched

# Keys must be strings; this one yields the length of the instance name.
peer_keys contains count(cluster) if {
	cluster := input.pod.labels["app.kubernetes.io/instance"]
}
