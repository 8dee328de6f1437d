# METADATA
# title: Peer index keys
# description: >-
#   Groups a pod belongs to, "<entry>/<namespace>/<cluster>". Go indexes bound
#   pods by these keys; an empty set means no rule applies to the pod.
package regosched

import data.regosched.workloads

# METADATA
# entrypoint: true
peer_keys contains sprintf("%s/%s/%s", [name, input.pod.namespace, m.cluster]) if {
	some name, m in workloads.pod_entries
}
