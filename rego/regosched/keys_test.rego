# peer_keys: one "<entry>/<namespace>/<cluster>" key per matching workload entry.
package regosched.keys_test

import data.regosched.fixtures_test as f
import data.regosched.peer_keys

test_redis_key if {
	peer_keys == {"redis/shop/cache"} with input as {"pod": f.pending("cache-0-master", f.redis_shard("cache", "master", "0"))}
	peer_keys == {"redis/shop/cache"} with input as {"pod": f.pod("cache-replicas-0", "shop", "u1", "node-1", f.redis("cache", "slave"))}
}

test_es_and_eck_keys if {
	peer_keys == {"elasticsearch/logs/es"} with input as {"pod": f.pod("es-master-0", "logs", "u1", "", f.es("es", "master"))}
	peer_keys == {"elasticsearch-eck/logs/qs"} with input as {"pod": f.pod("qs-es-0", "logs", "u1", "", f.eck("qs", "false"))}
}

test_overlapping_entries_give_several_keys if {
	labels := object.union(f.es("es", "data"), f.eck("qs", "true"))
	peer_keys == {"elasticsearch/logs/es", "elasticsearch-eck/logs/qs"} with input as {"pod": f.pod("x", "logs", "u1", "", labels)}
}

test_no_keys_for_unrelated_or_clusterless_pods if {
	count(peer_keys) == 0 with input as {"pod": f.pending("web-0", {"app": "web"})}
	count(peer_keys) == 0 with input as {"pod": f.pending("web-0", {})}
	count(peer_keys) == 0 with input as {"pod": f.pending("web-0", null)}
	count(peer_keys) == 0 with input as {"pod": {"name": "web-0", "namespace": "shop", "uid": "u", "node": ""}}
	count(peer_keys) == 0 with input as {"pod": f.pending("r", {"app.kubernetes.io/name": "redis"})}
	count(peer_keys) == 0 with input as {"pod": f.pending("r", f.redis("", "master"))}
	count(peer_keys) == 0 with input as {"pod": f.pending("r", object.union(f.redis("cache", "master"), {"app.kubernetes.io/name": "valkey"}))}
}

test_user_added_entry_key if {
	cfg := {"workloads": {"kafka": {"match_exists": ["strimzi.io/cluster"], "cluster_label": "strimzi.io/cluster"}}}
	peer_keys == {"kafka/mq/k"} with data.regosched.config as cfg
		with input as {"pod": f.pod("k-0", "mq", "u1", "", {"strimzi.io/cluster": "k"})}
}
