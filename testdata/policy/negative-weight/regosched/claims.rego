package regosched.claims

marks.instance := "{pod} of the same instance"

# Weights must be non-negative numbers.
spread contains {"mark": "instance", "rule": "sample", "topology_key": "kubernetes.io/hostname", "weight": -1}
