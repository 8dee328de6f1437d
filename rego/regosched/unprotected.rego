# Unprotected pods: why no hard rule, or only the careful one for unknown roles, protects a
# pod: no workload matches its labels, or its labels name none of its
# workload's roles. regosched counts such pods of its profile
# (regosched_unprotected_pods_total), logs each once, and explain shows
# the message.
package regosched

import data.regosched.config
import data.regosched.workloads

# METADATA
# entrypoint: true
unprotected contains {"reason": "no_workload", "message": "no workload of the policy matches the pod's labels"} if {
	count(workloads.pod_entries) == 0
}

unprotected contains {"reason": "role_unknown", "message": msg} if {
	some name, m in workloads.pod_entries
	entry := config.workloads[name]
	count(object.get(entry, "roles", {})) > 0
	not has_labelled_role(entry, m.roles)
	msg := sprintf("%s: the pod's labels name no role of workload %s (cluster %s)%s", [
		m.kind, name, m.cluster,
		unknown_role_effect(entry),
	])
}

has_labelled_role(entry, roles) if {
	some role in roles
	entry.roles[role]
}

unknown_role_effect(entry) := sprintf("; it is kept apart as role %q until its role is known", [entry.unknown_role]) if {
	entry.unknown_role
} else := "; no hard rule applies to it"
