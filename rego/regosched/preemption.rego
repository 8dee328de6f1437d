# METADATA
# title: Preemption protection
# description: >-
#   A pod whose role is listed in its workload entry's "protected_roles" is
#   never chosen as a preemption victim (e.g. a Redis master: evicting it
#   forces a failover).
package regosched.preemption

import data.regosched.workloads

# METADATA
# entrypoint: true
default protected := false

protected if {
	some name, m in workloads.pod_entries
	some role in object.get(data.regosched.config.workloads[name], "protected_roles", [])
	role in m.roles
}
