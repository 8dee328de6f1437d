# METADATA
# title: Live roles
# description: >-
#   Where regosched asks the software itself for a pod's role
#   (--redis-roles): for each workload entry of the pod with live_roles, the
#   source and the pod's port to ask. regosched writes what it hears as
#   config.live_labels, which workloads.roles_of prefers to the chart's labels.
package regosched.live

import data.regosched.config
import data.regosched.workloads

# METADATA
# entrypoint: true
roles contains {
	"workload": name,
	"source": entry.live_roles.source,
	"port_names": object.get(entry.live_roles, "port_names", ["redis", "tcp-redis"]),
	"port": object.get(entry.live_roles, "port", 6379),
} if {
	some name, _ in workloads.pod_entries
	entry := config.workloads[name]
	entry.live_roles
}

# METADATA
# entrypoint: true
labels := workloads.live_labels
