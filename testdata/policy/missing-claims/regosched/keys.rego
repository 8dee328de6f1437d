package regosched

peer_keys contains sprintf("%s/%s", [input.pod.namespace, cluster]) if {
	cluster := input.pod.labels["app.kubernetes.io/instance"]
}
