package regosched.claims

# Two pods of one instance keep off each other's node.
marks.instance := "{pod} of the same instance"

separate contains {"mark": "instance", "rule": "sample"}
