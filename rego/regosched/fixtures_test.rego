# Shared pod/label builders for the regosched tests, and what regosched reads
# from the claims of two pods.
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

# The claims regosched evaluates for pod: data.regosched.claims, input {pod}.
claims_of(pod) := c if {
	c := data.regosched.claims with input as {"pod": pod}
}

# The hard rules pending holds against peer, read off the two pods' claims:
# each separate entry of pending whose mark peer's marks hold, with peer's
# description under that mark (regosched puts the peer's namespace/name in
# place of {pod}). Which pods are peers (bound, not pending itself) is
# regosched's, not the claims'.
separates(pending, peer) := {{"rule": s.rule, "reason": what} |
	marks := claims_of(peer).marks
	some s in claims_of(pending).separate
	not s.topology_key
	what := marks[s.mark]
}

# The hard rules per zone pending holds against peer, likewise: the
# separate entries with a topology_key (regosched keeps pending out of the
# peer's zone and says "in zone <value>" for "on this node").
zone_separates(pending, peer) := {{"rule": s.rule, "topology_key": s.topology_key} |
	marks := claims_of(peer).marks
	some s in claims_of(pending).separate
	s.topology_key
	marks[s.mark]
}

# The soft rules likewise: each spread entry of pending whose mark peer's
# marks hold, as {rule, topology_key, weight}.
spreads(pending, peer) := {object.remove(s, ["mark"]) |
	marks := claims_of(peer).marks
	some s in claims_of(pending).spread
	marks[s.mark]
}
