package regosched

peer_keys contains sprintf("%s/%s", [input.pod.namespace, cluster]) if {
	cluster := input.pod.labels["app.kubernetes.io/instance"]
}

# Two different claims for any pod with a name and a namespace: evaluating
# them with peer_keys fails.
claims := {"marks": {"a": "{pod}"}} if input.pod.name != ""

claims := {"marks": {"b": "{pod}"}} if input.pod.namespace != ""
