# Shared pod/label builders for the regosched tests.
package regosched.fixtures_test

pod(name, ns, uid, node, labels) := {
	"name": name,
	"namespace": ns,
	"uid": uid,
	"labels": labels,
	"priority": 0,
	"node": node,
}

redis(instance, component) := {
	"app.kubernetes.io/name": "redis",
	"app.kubernetes.io/instance": instance,
	"app.kubernetes.io/component": component,
}

redis_shard(instance, component, shard) := object.union(redis(instance, component), {"regosched.io/shard": shard})

es(instance, component) := {
	"app.kubernetes.io/name": "elasticsearch",
	"app.kubernetes.io/instance": instance,
	"app.kubernetes.io/component": component,
}

eck(cluster, node_data) := {
	"elasticsearch.k8s.elastic.co/cluster-name": cluster,
	"elasticsearch.k8s.elastic.co/node-data": node_data,
}

# The pending pod in shop/cache (Redis) unless said otherwise.
pending(name, labels) := pod(name, "shop", "pending", "", labels)
