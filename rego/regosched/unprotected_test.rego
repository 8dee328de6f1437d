# Unprotected pods are named with the reason.
package regosched.unprotected_test

import data.regosched
import data.regosched.fixtures_test as f

test_no_workload if {
	regosched.unprotected == {{"reason": "no_workload", "message": "no workload of the policy matches the pod's labels"}} with input as {"pod": f.pending("web-0", {"app": "web"})}
}

test_redis_without_role if {
	regosched.unprotected == {{
		"reason": "role_unknown",
		"message": "redis: the pod's labels name no role of workload redis (cluster cache); no hard rule applies to it",
	}} with input as {"pod": f.pending("cache-0", f.redis("cache", "sentinel"))}
}

test_unknown_role_kept_apart if {
	cfg := {"hostname_key": "h", "zone_label": "z", "workloads": {"rc": {
		"kind": "redis",
		"cluster_label": "c",
		"roles": {"master": [{"r": "m"}]},
		"unknown_role": "unknown",
	}}}
	regosched.unprotected == {{
		"reason": "role_unknown",
		"message": "redis: the pod's labels name no role of workload rc (cluster x); it is kept apart as role \"unknown\" until its role is known",
	}} with input as {"pod": f.pending("x-0", {"c": "x"})}
		with data.regosched.config as cfg
}

test_protected_pod_is_not_listed if {
	count(regosched.unprotected) == 0 with input as {"pod": f.pending("cache-0", f.redis_shard("cache", "master", "0"))}
}

# A Bitnami Sentinel pod before its isMaster label matches the generic Redis
# entry and the Sentinel preset: one message, naming both, kept apart.
test_sentinel_pod_without_is_master if {
	pod := f.pending("cache-node-0", {
		"app.kubernetes.io/name": "redis",
		"app.kubernetes.io/instance": "cache",
		"app.kubernetes.io/component": "node",
		"statefulset.kubernetes.io/pod-name": "cache-node-0",
	})
	regosched.unprotected == {{
		"reason": "role_unknown",
		"message": "redis: the pod's labels name no role of workload bitnami-redis-sentinel, redis (cluster cache); it is kept apart as role \"unknown\" until its role is known",
	}} with input as {"pod": pod}
}

# A role no hard rule concerns is unprotected as an unknown one is.
test_role_without_hard_rule if {
	regosched.unprotected == {{
		"reason": "no_hard_rule",
		"message": "elasticsearch: no hard rule of workload elasticsearch (cluster logs) concerns role coordinating",
	}} with input as {"pod": f.pending("logs-coordinating-0", f.es("logs", "coordinating-only"))}
}
