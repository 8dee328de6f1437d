# The presets of config/data.json on the labels real charts and operators put
# on their pods (testdata/presets holds the full label sets and sources):
# which peers the pending pod's claims keep it apart from.
package regosched.presets_test

import data.regosched.fixtures_test as f
import data.regosched.preemption.protected

# Bitnami redis chart, sentinel.enabled: StatefulSet cache-redis-node.
sentinel_node(name, extra) := object.union(
	{
		"app.kubernetes.io/component": "node",
		"app.kubernetes.io/instance": "cache",
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/name": "redis",
		"app.kubernetes.io/version": "8.2.1",
		"helm.sh/chart": "redis-23.1.1",
		"statefulset.kubernetes.io/pod-name": name,
	},
	extra,
)

# Bitnami redis-cluster chart: no role or shard label of its own.
redis_cluster(name, extra) := object.union(
	{
		"app.kubernetes.io/instance": "sessions",
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/name": "redis-cluster",
		"app.kubernetes.io/version": "8.2.1",
		"helm.sh/chart": "redis-cluster-13.0.5",
		"statefulset.kubernetes.io/pod-name": name,
	},
	extra,
)

# The pending pod in web (the redis-cluster release's namespace).
web_pending(name, labels) := f.pod(name, "web", "pending", "", labels)

live(role, shard) := {"regosched.io/role": role, "regosched.io/shard": shard}

# ECK: every role label "true" or "false"; roles lists the true ones.
eck(cluster, sset, roles) := object.union(
	{
		"common.k8s.elastic.co/type": "elasticsearch",
		"elasticsearch.k8s.elastic.co/cluster-name": cluster,
		"elasticsearch.k8s.elastic.co/statefulset-name": sset,
		"elasticsearch.k8s.elastic.co/version": "8.17.0",
	},
	{sprintf("elasticsearch.k8s.elastic.co/node-%s", [r]): sprintf("%v", [r in roles]) | some r in [
		"master", "data", "ingest", "ml", "transform", "remote_cluster_client", "voting_only",
		"data_content", "data_cold", "data_hot", "data_warm", "data_frozen",
	]},
)

# A new Sentinel-mode pod names no role (isMaster comes later, if at all):
# it may start as master, so it stays off the node of every member.
test_sentinel_new_pod_apart_from_master if {
	pending := f.pending("cache-redis-node-1", sentinel_node("cache-redis-node-1", {"app.kubernetes.io/role": "slave"}))
	peer := f.pod("cache-redis-node-0", "shop", "u0", "node-1", sentinel_node("cache-redis-node-0", {"isMaster": "true"}))
	f.separates(pending, peer) == {{"rule": "redis-unknown-apart", "reason": "redis: master {pod} of cluster cache already on this node"}}
}

test_sentinel_new_pod_apart_from_replica if {
	pending := f.pending("cache-redis-node-1", sentinel_node("cache-redis-node-1", {}))
	peer := f.pod("cache-redis-node-2", "shop", "u2", "node-2", sentinel_node("cache-redis-node-2", {"isMaster": "false"}))
	f.separates(pending, peer) == {{"rule": "redis-unknown-apart", "reason": "redis: replica {pod} of cluster cache already on this node"}}
}

# A recreated master (role remembered by regosched) vs the pod Sentinel
# promoted meanwhile (isMaster=true): masters apart. Both the generic redis
# entry and the Sentinel preset give this conflict (two separate entries meet
# a mark of the peer), and it is the same one.
test_sentinel_master_vs_master_to_be if {
	pending := f.pending("cache-redis-node-0", sentinel_node("cache-redis-node-0", {"regosched.io/role": "master"}))
	peer := f.pod("cache-redis-node-2", "shop", "u2", "node-1", sentinel_node("cache-redis-node-2", {"isMaster": "true"}))
	marks := f.claims_of(peer).marks
	met := {s.mark | some s in f.claims_of(pending).separate; marks[s.mark]}
	met == {"redis/shop/cache/cluster/cache/master", "bitnami-redis-sentinel/shop/cache/cluster/cache/master"}
	f.separates(pending, peer) == {{"rule": "redis-masters", "reason": "redis: master {pod} of cluster cache already on this node"}}
}

# Two known replicas may share a node; a pod of unknown role may not join them.
test_sentinel_replicas_share_but_not_with_unknown if {
	replica := f.pending("cache-redis-node-1", sentinel_node("cache-redis-node-1", {"regosched.io/role": "replica"}))
	count(f.separates(replica, f.pod("cache-redis-node-2", "shop", "u2", "node-1", sentinel_node("cache-redis-node-2", {"isMaster": "false"})))) == 0
	f.separates(replica, f.pod("cache-redis-node-2", "shop", "u2", "node-1", sentinel_node("cache-redis-node-2", {}))) == {{
		"rule": "redis-unknown-apart",
		"reason": "redis: unknown {pod} of cluster cache already on this node",
	}}
}

# Bitnami redis-cluster: a pod whose role Redis has not told yet is kept off
# every node holding a member of its cluster, whatever the member's role.
test_redis_cluster_unknown_apart_from_every_member if {
	peers := [
		f.pod("sessions-redis-cluster-0", "web", "u0", "node-1", redis_cluster("sessions-redis-cluster-0", live("master", "slot-0"))),
		f.pod("sessions-redis-cluster-4", "web", "u4", "node-2", redis_cluster("sessions-redis-cluster-4", live("replica", "slot-5461"))),
		f.pod("sessions-redis-cluster-5", "web", "u5", "node-3", redis_cluster("sessions-redis-cluster-5", {})),
		f.pod("other-redis-cluster-0", "web", "o0", "node-4", object.union(redis_cluster("other-redis-cluster-0", {}), {"app.kubernetes.io/instance": "other"})),
	]
	pending := web_pending("sessions-redis-cluster-2", redis_cluster("sessions-redis-cluster-2", {}))
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(pending, p)} == {
		["u0", "redis-unknown-apart", "redis: master {pod} of cluster sessions already on this node"],
		["u4", "redis-unknown-apart", "redis: replica {pod} of cluster sessions already on this node"],
		["u5", "redis-unknown-apart", "redis: unknown {pod} of cluster sessions already on this node"],
	}
}

# Known roles: a replica stays off its own master's node only, and a master
# off every other master's node.
test_redis_cluster_live_roles_by_shard if {
	peers := [
		f.pod("sessions-redis-cluster-0", "web", "u0", "node-1", redis_cluster("sessions-redis-cluster-0", live("master", "slot-0"))),
		f.pod("sessions-redis-cluster-1", "web", "u1", "node-2", redis_cluster("sessions-redis-cluster-1", live("master", "slot-5461"))),
		f.pod("sessions-redis-cluster-4", "web", "u4", "node-3", redis_cluster("sessions-redis-cluster-4", live("replica", "slot-0"))),
	]
	replica := web_pending("sessions-redis-cluster-3", redis_cluster("sessions-redis-cluster-3", live("replica", "slot-0")))
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(replica, p)} == {[
		"u0", "redis-master-replica",
		"redis: master {pod} of cluster sessions (shard slot-0) already on this node",
	]}
	master := web_pending("sessions-redis-cluster-2", redis_cluster("sessions-redis-cluster-2", live("master", "slot-10923")))
	{[p.uid, s.rule] | some p in peers; some s in f.separates(master, p)} == {["u0", "redis-masters"], ["u1", "redis-masters"]}
}

# The chart's post-upgrade Job pod has the chart's labels but is no member.
test_redis_cluster_update_job_not_a_member if {
	job := {
		"app.kubernetes.io/instance": "sessions",
		"app.kubernetes.io/name": "redis-cluster",
		"helm.sh/chart": "redis-cluster-13.0.5",
		"job-name": "sessions-redis-cluster-cluster-update",
	}
	pending := web_pending("sessions-redis-cluster-2", redis_cluster("sessions-redis-cluster-2", {}))
	count(f.separates(pending, f.pod("sessions-redis-cluster-cluster-update-x7k2p", "web", "j", "node-1", job))) == 0
}

# Bitnami valkey chart (architecture=replication), release cache in shop:
# StatefulSets cache-valkey-primary and cache-valkey-replicas, or, with
# sentinel.enabled, cache-valkey-node. The chart says primary, not master.
valkey(name, component, extra) := object.union(
	{
		"app.kubernetes.io/component": component,
		"app.kubernetes.io/instance": "cache",
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/name": "valkey",
		"app.kubernetes.io/version": "8.1.3",
		"helm.sh/chart": "valkey-4.0.2",
		"statefulset.kubernetes.io/pod-name": name,
	},
	extra,
)

# Bitnami valkey-cluster chart: no role or shard label of its own.
valkey_cluster(name, extra) := object.union(
	{
		"app.kubernetes.io/instance": "sessions",
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/name": "valkey-cluster",
		"app.kubernetes.io/version": "8.1.3",
		"helm.sh/chart": "valkey-cluster-3.0.25",
		"statefulset.kubernetes.io/pod-name": name,
	},
	extra,
)

# Two primaries of one release (primary.replicaCount > 1) never share a node.
test_valkey_primary_apart_from_primary if {
	pending := f.pending("cache-valkey-primary-1", valkey("cache-valkey-primary-1", "primary", {}))
	peer := f.pod("cache-valkey-primary-0", "shop", "p0", "node-1", valkey("cache-valkey-primary-0", "primary", {}))
	f.separates(pending, peer) == {{"rule": "redis-masters", "reason": "redis: master {pod} of cluster cache already on this node"}}
}

# The primary and its replicas (the release's one shard) never share a node,
# either way round.
test_valkey_primary_apart_from_its_replica if {
	primary := f.pending("cache-valkey-primary-0", valkey("cache-valkey-primary-0", "primary", {}))
	replica := f.pod("cache-valkey-replicas-0", "shop", "r0", "node-1", valkey("cache-valkey-replicas-0", "replica", {}))
	f.separates(primary, replica) == {{"rule": "redis-master-replica", "reason": "redis: replica {pod} of cluster cache already on this node"}}
	pending_replica := f.pending("cache-valkey-replicas-1", valkey("cache-valkey-replicas-1", "replica", {}))
	peer := f.pod("cache-valkey-primary-0", "shop", "p0", "node-1", valkey("cache-valkey-primary-0", "primary", {}))
	f.separates(pending_replica, peer) == {{"rule": "redis-master-replica", "reason": "redis: master {pod} of cluster cache already on this node"}}

	# Replicas may share a node.
	count(f.separates(pending_replica, replica)) == 0
}

# A primary of another release, or of the same release name in another
# namespace, or a Redis master of a release also named cache, is no peer.
test_valkey_other_release_or_namespace_unconstrained if {
	pending := f.pending("cache-valkey-primary-0", valkey("cache-valkey-primary-0", "primary", {}))
	peers := [
		f.pod("other-valkey-primary-0", "shop", "o0", "node-1", object.union(valkey("other-valkey-primary-0", "primary", {}), {"app.kubernetes.io/instance": "other"})),
		f.pod("cache-valkey-primary-0", "shop2", "n0", "node-1", valkey("cache-valkey-primary-0", "primary", {})),
		f.pod("cache-valkey-replicas-0", "shop2", "n1", "node-1", valkey("cache-valkey-replicas-0", "replica", {})),
		f.pod("cache-redis-master-0", "shop", "m0", "node-1", f.redis("cache", "master")),
	]
	{[p.uid, s.rule] | some p in peers; some s in f.separates(pending, p)} == set()
}

# Sentinel mode: a new pod names no role (isPrimary comes later, if at all):
# it may start as primary, so it stays off the node of every member.
test_valkey_sentinel_new_pod_apart_from_every_member if {
	pending := f.pending("cache-valkey-node-1", valkey("cache-valkey-node-1", "node", {}))
	peers := [
		f.pod("cache-valkey-node-0", "shop", "u0", "node-1", valkey("cache-valkey-node-0", "node", {"isPrimary": "true"})),
		f.pod("cache-valkey-node-2", "shop", "u2", "node-2", valkey("cache-valkey-node-2", "node", {"isPrimary": "false"})),
		f.pod("other-valkey-node-0", "shop", "o0", "node-3", object.union(valkey("other-valkey-node-0", "node", {}), {"app.kubernetes.io/instance": "other"})),
	]
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(pending, p)} == {
		["u0", "redis-unknown-apart", "redis: master {pod} of cluster cache already on this node"],
		["u2", "redis-unknown-apart", "redis: replica {pod} of cluster cache already on this node"],
	}
}

# A recreated primary (role remembered by regosched) vs the pod Sentinel
# promoted meanwhile (isPrimary=true): both valkey entries give the conflict,
# and it is the same one.
test_valkey_sentinel_primary_vs_primary_to_be if {
	pending := f.pending("cache-valkey-node-0", valkey("cache-valkey-node-0", "node", {"regosched.io/role": "master"}))
	peer := f.pod("cache-valkey-node-2", "shop", "u2", "node-1", valkey("cache-valkey-node-2", "node", {"isPrimary": "true"}))
	marks := f.claims_of(peer).marks
	met := {s.mark | some s in f.claims_of(pending).separate; marks[s.mark]}
	met == {"bitnami-valkey/shop/cache/cluster/cache/master", "bitnami-valkey-sentinel/shop/cache/cluster/cache/master"}
	f.separates(pending, peer) == {{"rule": "redis-masters", "reason": "redis: master {pod} of cluster cache already on this node"}}
}

# valkey-cluster: a pod whose role Valkey has not told yet is kept off every
# node holding a member of its cluster; members of another release or
# namespace do not count.
test_valkey_cluster_unknown_apart_from_every_member if {
	peers := [
		f.pod("sessions-valkey-cluster-0", "web", "u0", "node-1", valkey_cluster("sessions-valkey-cluster-0", live("master", "slot-0"))),
		f.pod("sessions-valkey-cluster-4", "web", "u4", "node-2", valkey_cluster("sessions-valkey-cluster-4", live("replica", "slot-5461"))),
		f.pod("sessions-valkey-cluster-5", "web", "u5", "node-3", valkey_cluster("sessions-valkey-cluster-5", {})),
		f.pod("other-valkey-cluster-0", "web", "o0", "node-4", object.union(valkey_cluster("other-valkey-cluster-0", {}), {"app.kubernetes.io/instance": "other"})),
		f.pod("sessions-valkey-cluster-1", "web2", "n1", "node-5", valkey_cluster("sessions-valkey-cluster-1", {})),
	]
	pending := web_pending("sessions-valkey-cluster-2", valkey_cluster("sessions-valkey-cluster-2", {}))
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(pending, p)} == {
		["u0", "redis-unknown-apart", "redis: master {pod} of cluster sessions already on this node"],
		["u4", "redis-unknown-apart", "redis: replica {pod} of cluster sessions already on this node"],
		["u5", "redis-unknown-apart", "redis: unknown {pod} of cluster sessions already on this node"],
	}
}

# Known roles: a primary stays off the node of its own shard's replica and of
# every other primary, not off another shard's replica.
test_valkey_cluster_live_roles_by_shard if {
	peers := [
		f.pod("sessions-valkey-cluster-1", "web", "u1", "node-1", valkey_cluster("sessions-valkey-cluster-1", live("master", "slot-5461"))),
		f.pod("sessions-valkey-cluster-3", "web", "u3", "node-2", valkey_cluster("sessions-valkey-cluster-3", live("replica", "slot-0"))),
		f.pod("sessions-valkey-cluster-4", "web", "u4", "node-3", valkey_cluster("sessions-valkey-cluster-4", live("replica", "slot-5461"))),
	]
	primary := web_pending("sessions-valkey-cluster-0", valkey_cluster("sessions-valkey-cluster-0", live("master", "slot-0")))
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(primary, p)} == {
		["u1", "redis-masters", "redis: master {pod} of cluster sessions already on this node"],
		["u3", "redis-master-replica", "redis: replica {pod} of cluster sessions (shard slot-0) already on this node"],
	}
}

# The chart's post-upgrade Job pod has the chart's labels but is no member.
test_valkey_cluster_update_job_not_a_member if {
	job := {
		"app.kubernetes.io/instance": "sessions",
		"app.kubernetes.io/name": "valkey-cluster",
		"helm.sh/chart": "valkey-cluster-3.0.25",
		"job-name": "sessions-valkey-cluster-cluster-update",
	}
	pending := web_pending("sessions-valkey-cluster-2", valkey_cluster("sessions-valkey-cluster-2", {}))
	count(f.separates(pending, f.pod("sessions-valkey-cluster-cluster-update-q4m8n", "web", "j", "node-1", job))) == 0
}

# hyperspike valkey-operator: StatefulSet <name> in cluster mode, labels
# name=valkey, instance=<name>, component=valkey and no role or shard label.
hyperspike(name, extra) := object.union(
	{
		"app.kubernetes.io/component": "valkey",
		"app.kubernetes.io/instance": "sessions",
		"app.kubernetes.io/name": "valkey",
		"statefulset.kubernetes.io/pod-name": name,
	},
	extra,
)

# Primaries of two shards of one Valkey never share a node.
test_hyperspike_primaries_apart if {
	pending := web_pending("sessions-1", hyperspike("sessions-1", live("master", "slot-5461")))
	peer := f.pod("sessions-0", "web", "u0", "node-1", hyperspike("sessions-0", live("master", "slot-0")))
	f.separates(pending, peer) == {{"rule": "redis-masters", "reason": "redis: master {pod} of cluster sessions already on this node"}}
}

# A pod whose role Valkey has not told yet is kept off every node holding a
# member of its Valkey; the proxy Deployment's pods are no members.
test_hyperspike_unknown_apart_from_every_member if {
	peers := [
		f.pod("sessions-0", "web", "u0", "node-1", hyperspike("sessions-0", live("master", "slot-0"))),
		f.pod("sessions-4", "web", "u4", "node-2", hyperspike("sessions-4", live("replica", "slot-5461"))),
		f.pod("sessions-5", "web", "u5", "node-3", hyperspike("sessions-5", {})),
		f.pod("sessions-proxy-7d9c8b6f5d-x2k4p", "web", "x", "node-4", object.union(
			object.remove(hyperspike("", {}), ["statefulset.kubernetes.io/pod-name"]),
			{"app.kubernetes.io/component": "valkey-proxy", "pod-template-hash": "7d9c8b6f5d"},
		)),
	]
	pending := web_pending("sessions-2", hyperspike("sessions-2", {}))
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(pending, p)} == {
		["u0", "redis-unknown-apart", "redis: master {pod} of cluster sessions already on this node"],
		["u4", "redis-unknown-apart", "redis: replica {pod} of cluster sessions already on this node"],
		["u5", "redis-unknown-apart", "redis: unknown {pod} of cluster sessions already on this node"],
	}
}

# Another Valkey, or one of the same name in another namespace, is no peer.
test_hyperspike_other_cluster_or_namespace_unconstrained if {
	pending := web_pending("sessions-2", hyperspike("sessions-2", {}))
	peers := [
		f.pod("other-0", "web", "o0", "node-1", object.union(hyperspike("other-0", live("master", "slot-0")), {"app.kubernetes.io/instance": "other"})),
		f.pod("sessions-0", "web2", "n0", "node-1", hyperspike("sessions-0", live("master", "slot-0"))),
	]
	{[p.uid, s.rule] | some p in peers; some s in f.separates(pending, p)} == set()
}

# valkey-io valkey-operator: one ValkeyNode StatefulSet per (shard, node),
# instance = the ValkeyNode's name, the cluster in valkey.io/cluster; no role
# label (node-index 0 is only the initial primary).
valkey_io(shard, node, extra) := object.union(
	{
		"app.kubernetes.io/component": "valkey-node",
		"app.kubernetes.io/instance": sprintf("sessions-%d-%d", [shard, node]),
		"app.kubernetes.io/managed-by": "valkey-operator",
		"app.kubernetes.io/name": "valkey",
		"app.kubernetes.io/part-of": "valkey",
		"statefulset.kubernetes.io/pod-name": sprintf("valkey-sessions-%d-%d-0", [shard, node]),
		"valkey.io/cluster": "sessions",
		"valkey.io/node-index": sprintf("%d", [node]),
		"valkey.io/shard-index": sprintf("%d", [shard]),
	},
	extra,
)

# Primaries of two shards never share a node, though each pod has its own
# app.kubernetes.io/instance.
test_valkey_io_primaries_apart if {
	pending := web_pending("valkey-sessions-1-0-0", valkey_io(1, 0, live("master", "slot-5461")))
	peer := f.pod("valkey-sessions-0-0-0", "web", "p0", "node-1", valkey_io(0, 0, live("master", "slot-0")))
	f.separates(pending, peer) == {{"rule": "redis-masters", "reason": "redis: master {pod} of cluster sessions already on this node"}}
}

# A pod whose role Valkey has not told yet (node-index 0 proves nothing) is
# kept off every node holding a member of its cluster.
test_valkey_io_unknown_apart_from_every_member if {
	peers := [
		f.pod("valkey-sessions-0-1-0", "web", "u0", "node-1", valkey_io(0, 1, live("master", "slot-0"))),
		f.pod("valkey-sessions-1-0-0", "web", "u1", "node-2", valkey_io(1, 0, live("replica", "slot-5461"))),
		f.pod("valkey-sessions-2-1-0", "web", "u2", "node-3", valkey_io(2, 1, {})),
	]
	pending := web_pending("valkey-sessions-2-0-0", valkey_io(2, 0, {}))
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(pending, p)} == {
		["u0", "redis-unknown-apart", "redis: master {pod} of cluster sessions already on this node"],
		["u1", "redis-unknown-apart", "redis: replica {pod} of cluster sessions already on this node"],
		["u2", "redis-unknown-apart", "redis: unknown {pod} of cluster sessions already on this node"],
	}
}

# Another ValkeyCluster, or one of the same name in another namespace, is no
# peer.
test_valkey_io_other_cluster_or_namespace_unconstrained if {
	pending := web_pending("valkey-sessions-2-0-0", valkey_io(2, 0, {}))
	peers := [
		f.pod("valkey-other-0-0-0", "web", "o0", "node-1", object.union(valkey_io(0, 0, live("master", "slot-0")), {
			"app.kubernetes.io/instance": "other-0-0",
			"statefulset.kubernetes.io/pod-name": "valkey-other-0-0-0",
			"valkey.io/cluster": "other",
		})),
		f.pod("valkey-sessions-0-0-0", "web2", "n0", "node-1", valkey_io(0, 0, live("master", "slot-0"))),
	]
	{[p.uid, s.rule] | some p in peers; some s in f.separates(pending, p)} == set()
}

# A pod of unknown role may be a master: never a preemption victim.
test_unknown_role_protected_from_preemption if {
	protected with input as {"pod": f.pod("sessions-redis-cluster-5", "web", "u5", "node-3", redis_cluster("sessions-redis-cluster-5", {}))}
	not protected with input as {"pod": f.pod("sessions-redis-cluster-4", "web", "u4", "node-2", redis_cluster("sessions-redis-cluster-4", live("replica", "slot-0")))}
}

# OT redis-operator RedisCluster "orders": StatefulSets orders-leader and
# orders-follower.
ot(sset, extra) := object.union(
	{"app": sprintf("orders-%s", [sset]), "redis_setup_type": "cluster", "role": sset, "cluster": "orders"},
	extra,
)

# OT redis-operator RedisCluster: role=leader only names the StatefulSet; the
# operator's redis-role (or regosched's live role) says who is master.
test_ot_cluster_redis_role_not_statefulset_role if {
	peers := [
		f.pod("orders-leader-1", "shop", "l1", "node-1", ot("leader", {"redis-role": "slave"})),
		f.pod("orders-follower-0", "shop", "f0", "node-2", ot("follower", {"redis-role": "master"})),
	]

	# No live shard yet: one shard "", so the master stays off every replica.
	master := f.pending("orders-leader-0", ot("leader", {"redis-role": "master"}))
	{[p.uid, s.rule] | some p in peers; some s in f.separates(master, p)} == {["f0", "redis-masters"], ["l1", "redis-master-replica"]}
	unknown := f.pending("orders-leader-2", ot("leader", {}))
	{[p.uid, s.rule] | some p in peers; some s in f.separates(unknown, p)} == {["l1", "redis-unknown-apart"], ["f0", "redis-unknown-apart"]}
}

# spotahome RedisFailover "cache": StatefulSet rfr-cache.
rf(role) := {
	"app.kubernetes.io/component": "redis",
	"app.kubernetes.io/managed-by": "redis-operator",
	"app.kubernetes.io/name": "cache",
	"app.kubernetes.io/part-of": "redis-failover",
	"redisfailovers.databases.spotahome.com/name": "cache",
	"redisfailovers-role": role,
}

# spotahome: every pod is created redisfailovers-role=slave; that default
# does not make it a replica.
test_spotahome_template_slave_is_unknown if {
	peers := [
		f.pod("rfr-cache-1", "shop", "u1", "node-1", rf("master")),
		f.pod("rfr-cache-2", "shop", "u2", "node-2", object.union(rf("slave"), {"regosched.io/role": "replica"})),
	]
	template := f.pending("rfr-cache-0", rf("slave"))
	{[p.uid, s.rule] | some p in peers; some s in f.separates(template, p)} == {["u1", "redis-unknown-apart"], ["u2", "redis-unknown-apart"]}
	replica := f.pending("rfr-cache-0", object.union(rf("slave"), {"regosched.io/role": "replica"}))
	{[p.uid, s.rule] | some p in peers; some s in f.separates(replica, p)} == {["u1", "redis-master-replica"]}
}

# ECK data tiers: node-data is "false" on a hot-tier pod, node-data_hot "true".
test_eck_hot_tier_pods_apart if {
	pending := f.pod("quickstart-es-hot-1", "logs", "pending", "", eck("quickstart", "quickstart-es-hot", ["data_hot", "data_content", "ingest"]))
	peer := f.pod("quickstart-es-hot-0", "logs", "u0", "node-1", eck("quickstart", "quickstart-es-hot", ["data_hot", "data_content", "ingest"]))
	f.separates(pending, peer) == {{
		"rule": "elasticsearch-eck-data",
		"reason": "elasticsearch: data {pod} of cluster quickstart already on this node",
	}}
}

# Every tier holds shards: hot, warm, cold and frozen pods keep apart too;
# coordinating-only and ML pods are free.
test_eck_tiers_and_free_roles if {
	pending := f.pod("quickstart-es-hot-1", "logs", "pending", "", eck("quickstart", "quickstart-es-hot", ["data_hot"]))
	peers := [
		f.pod("quickstart-es-warm-0", "logs", "w", "node-1", eck("quickstart", "quickstart-es-warm", ["data_warm"])),
		f.pod("quickstart-es-cold-0", "logs", "c", "node-2", eck("quickstart", "quickstart-es-cold", ["data_cold"])),
		f.pod("quickstart-es-frozen-0", "logs", "z", "node-3", eck("quickstart", "quickstart-es-frozen", ["data_frozen"])),
		f.pod("quickstart-es-coord-0", "logs", "x", "node-4", eck("quickstart", "quickstart-es-coord", [])),
		f.pod("quickstart-es-ml-0", "logs", "m", "node-4", eck("quickstart", "quickstart-es-ml", ["ml", "remote_cluster_client"])),
	]
	{p.uid | some p in peers; count(f.separates(pending, p)) > 0} == {"w", "c", "z"}
}

# Master-eligible pods (voting-only ones too) keep apart for quorum; a
# master-only pod may share a node with a data pod.
test_eck_masters_apart if {
	pending := f.pod("quickstart-es-masters-1", "logs", "pending", "", eck("quickstart", "quickstart-es-masters", ["master"]))
	peers := [
		f.pod("quickstart-es-masters-0", "logs", "m0", "node-1", eck("quickstart", "quickstart-es-masters", ["master"])),
		f.pod("quickstart-es-voting-0", "logs", "v0", "node-2", eck("quickstart", "quickstart-es-voting", ["master", "voting_only"])),
		f.pod("quickstart-es-hot-0", "logs", "h0", "node-3", eck("quickstart", "quickstart-es-hot", ["data_hot"])),
	]
	reason := "elasticsearch: master {pod} of cluster quickstart already on this node"
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(pending, p)} == {
		["m0", "elasticsearch-eck-masters", reason],
		["v0", "elasticsearch-eck-masters", reason],
	}
}

# Bitnami elasticsearch chart, release "logs" (useIstioLabels adds app).
bes(component, index) := {
	"app": component,
	"app.kubernetes.io/component": component,
	"app.kubernetes.io/instance": "logs",
	"app.kubernetes.io/managed-by": "Helm",
	"app.kubernetes.io/name": "elasticsearch",
	"app.kubernetes.io/version": "9.1.2",
	"helm.sh/chart": "elasticsearch-22.1.7",
	"statefulset.kubernetes.io/pod-name": sprintf("logs-elasticsearch-%s-%d", [component, index]),
}

# Bitnami elasticsearch: masters apart through the chart's preset, data apart
# as in the generic entry (one conflict, not two).
test_bitnami_elasticsearch_masters_and_data if {
	peers := [
		f.pod("logs-elasticsearch-master-0", "search", "m0", "node-1", bes("master", 0)),
		f.pod("logs-elasticsearch-data-0", "search", "d0", "node-2", bes("data", 0)),
		f.pod("logs-elasticsearch-coordinating-0", "search", "c0", "node-1", bes("coordinating-only", 0)),
	]
	master := f.pod("logs-elasticsearch-master-1", "search", "pending", "", bes("master", 1))
	{[p.uid, s.rule] | some p in peers; some s in f.separates(master, p)} == {["m0", "elasticsearch-masters"]}
	data_pod := f.pod("logs-elasticsearch-data-1", "search", "pending", "", bes("data", 1))
	{[p.uid, s.rule, s.reason] | some p in peers; some s in f.separates(data_pod, p)} == {[
		"d0", "elasticsearch-data",
		"elasticsearch: data {pod} of cluster logs already on this node",
	]}
}
