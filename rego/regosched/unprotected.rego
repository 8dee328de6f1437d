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

# A pod may match several entries (a chart's preset and a generic one): its
# role is unknown when none of them names one, and it is kept apart when any
# of them has an unknown_role for it.
unprotected contains {"reason": "role_unknown", "message": msg} if {
	count(workloads.pod_entries) > 0
	with_roles := {name | some name, _ in workloads.pod_entries; count(object.get(config.workloads[name], "roles", {})) > 0}
	count(with_roles) > 0
	every name in with_roles {
		not has_labelled_role(config.workloads[name], workloads.pod_entries[name].roles)
	}
	m := workloads.pod_entries[sort(with_roles)[0]]
	msg := sprintf("%s: the pod's labels name no role of workload %s (cluster %s)%s", [
		m.kind, concat(", ", sort(with_roles)), m.cluster,
		unknown_role_effect(with_roles),
	])
}

has_labelled_role(entry, roles) if {
	some role in roles
	entry.roles[role]
}

unknown_role_effect(names) := sprintf("; it is kept apart as role %q until its role is known", [sort(roles)[0]]) if {
	roles := {role | some name in names; role := config.workloads[name].unknown_role}
	count(roles) > 0
} else := "; no hard rule applies to it"

# A pod whose labels name a role, but no hard rule of any of its workloads
# concerns that role (a Bitnami Elasticsearch coordinating-only pod): as
# unprotected as a pod of unknown role, and said so alike.
unprotected contains {"reason": "no_hard_rule", "message": msg} if {
	count(workloads.pod_entries) > 0
	labelled := {name |
		some name, m in workloads.pod_entries
		has_labelled_role(config.workloads[name], m.roles)
	}
	count(labelled) > 0
	every name, m in workloads.pod_entries {
		not hard_rule_for(config.workloads[name], m.roles)
	}
	m := workloads.pod_entries[sort(labelled)[0]]
	msg := sprintf("%s: no hard rule of workload %s (cluster %s) concerns role %s", [
		m.kind, concat(", ", sort(labelled)), m.cluster, concat("/", sort(m.roles - {"*"})),
	])
}

# Some hard rule of entry (per node, per zone, or a quorum) concerns a pod
# of roles.
hard_rule_for(entry, roles) if {
	some kind in ["separate", "zone_separate", "quorum"]
	some r in object.get(entry, kind, [])
	r.role in roles
}
