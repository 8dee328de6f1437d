# preemption.protected: roles listed in "protected_roles" are never evicted.
package regosched.preemption_test

import data.regosched.fixtures_test as f
import data.regosched.preemption.protected

test_redis_master_protected if {
	protected with input as {"pod": f.pod("cache-0-master", "shop", "u1", "node-1", f.redis_shard("cache", "master", "0"))}
}

test_redis_replica_es_and_unrelated_not_protected if {
	not protected with input as {"pod": f.pod("cache-0-replica", "shop", "u1", "node-1", f.redis("cache", "replica"))}
	not protected with input as {"pod": f.pod("es-data-0", "logs", "u1", "node-1", f.es("es", "data"))}
	not protected with input as {"pod": f.pod("web", "shop", "u1", "node-1", {"app": "web"})}
}

test_protected_roles_from_data if {
	cfg := {"workloads": {"es": {
		"kind": "elasticsearch",
		"match_labels": {"app.kubernetes.io/name": "elasticsearch"},
		"cluster_label": "app.kubernetes.io/instance",
		"roles": {"data": [{"app.kubernetes.io/component": "data"}]},
		"protected_roles": ["data"],
	}}}
	protected with input as {"pod": f.pod("es-data-0", "logs", "u1", "node-1", f.es("es", "data"))}
		with data.regosched.config as cfg
}
