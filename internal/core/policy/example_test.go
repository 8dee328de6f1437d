package policy_test

import (
	"context"
	"fmt"
	"maps"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// redisMaster labels a master of the Redis cluster "cache" as the default
// policy's redis workload reads it.
var redisMaster = map[string]string{
	"app.kubernetes.io/name":      "redis",
	"app.kubernetes.io/instance":  "cache",
	"app.kubernetes.io/component": "master",
}

// module is a bundle module parsed from src.
func module(path, src string) bundle.ModuleFile {
	return bundle.ModuleFile{Path: path, Raw: []byte(src), Parsed: ast.MustParseModule(src)}
}

// Two masters of one Redis cluster may not share a node: the pending one
// conflicts on the node of the bound one, and prefers other nodes.
func ExamplePolicy_Join() {
	ctx := context.Background()
	pol, err := bundles.Options{}.LoadFS(ctx, regosched.DefaultPolicy(), "default")
	if err != nil {
		fmt.Println(err)
		return
	}
	bound := &model.Pod{Namespace: "shop", Name: "cache-0", UID: "uid-0", Labels: model.NewLabels(redisMaster), Node: "node-1"}
	pending := &model.Pod{Namespace: "shop", Name: "cache-1", UID: "uid-1", Labels: model.NewLabels(redisMaster)}

	conflicts, penalties, err := pol.Join(ctx, &policy.Input{Pod: pending, Peers: []*model.Pod{bound}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range conflicts {
		fmt.Printf("conflict on %s (%s): %s\n", c.Node, c.Rule, c.Reason)
	}
	for _, p := range penalties {
		fmt.Printf("penalty %s=%s %g (%s)\n", p.TopologyKey, p.Value, p.Weight, p.Rule)
	}
	// Output:
	// conflict on node-1 (redis-masters): redis: master shop/cache-0 of cluster cache already on this node
	// penalty kubernetes.io/hostname=node-1 1 (redis-node-spread)
}

// A pod's group keys name its workload, namespace and cluster; a pod that
// no workload matches is in no group and has no peers.
func ExamplePolicy_PeerKeys() {
	ctx := context.Background()
	pol, err := bundles.Options{}.LoadFS(ctx, regosched.DefaultPolicy(), "default")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, labels := range []map[string]string{
		redisMaster,
		{"app.kubernetes.io/name": "elasticsearch", "app.kubernetes.io/instance": "logs", "app.kubernetes.io/component": "data"},
		{"app": "web"},
	} {
		keys, err := pol.PeerKeys(ctx, &model.Pod{Namespace: "shop", Name: "p", UID: "u", Labels: model.NewLabels(labels)})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(keys)
	}
	// Output:
	// [redis/shop/cache]
	// [elasticsearch/shop/logs]
	// []
}

// The pending pod is described for what it avoids: on the node or in the
// zone (separate) and, less strictly, in a topology domain (spread).
func ExamplePolicy_DescribePending() {
	ctx := context.Background()
	pol, err := bundles.Options{}.LoadFS(ctx, regosched.DefaultPolicy(), "default")
	if err != nil {
		fmt.Println(err)
		return
	}
	labels := map[string]string{"regosched.io/shard": "0"}
	maps.Copy(labels, redisMaster)
	keys, c, err := pol.DescribePending(ctx, &model.Pod{Namespace: "shop", Name: "cache-0", UID: "u", Labels: model.NewLabels(labels)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("keys:", keys)
	for _, a := range c.Separate() {
		fmt.Printf("separate %s: %s\n", a.Rule, a.Mark)
	}
	for _, a := range c.Spread() {
		fmt.Printf("spread %s: %s by %s, weight %g\n", a.Rule, a.Mark, a.TopologyKey, a.Weight)
	}
	// Output:
	// keys: [redis/shop/cache]
	// separate redis-masters: redis/shop/cache/cluster/cache/master
	// separate redis-master-replica: redis/shop/cache/shard//replica
	// separate redis-master-replica: redis/shop/cache/shard/0/replica
	// separate redis-master-replica-zones: redis/shop/cache/shard/0/replica
	// spread redis-node-spread: redis/shop/cache/cluster/cache/* by kubernetes.io/hostname, weight 1
	// spread redis-shard-zones: redis/shop/cache/shard/0/* by topology.kubernetes.io/zone, weight 2
}

// A bundle that still says a rule pairwise is refused, naming the rule.
func ExampleCompile() {
	b := &bundle.Bundle{Modules: []bundle.ModuleFile{
		module("regosched/keys.rego", `package regosched

peer_keys contains input.pod.labels.app
`),
		module("regosched/filter.rego", `package regosched.filter

conflicts contains {"node": peer.node, "rule": "one-per-node"} if {
	some peer in input.peers
	peer.labels.app == input.pod.labels.app
}
`),
	}}
	_, err := policy.Compile(context.Background(), b)
	fmt.Println(err)
	// Output:
	// policy defines data.regosched.filter.conflicts, which regosched no longer evaluates: say the rule with data.regosched.claims (see docs/policies.md)
}

// The same rule said with claims: each pod marks itself with its app and
// keeps off the node of any peer with its own app's mark.
func ExampleCompile_claims() {
	ctx := context.Background()
	b := &bundle.Bundle{Modules: []bundle.ModuleFile{
		module("regosched/keys.rego", `package regosched

peer_keys contains input.pod.labels.app
`),
		module("regosched/claims.rego", `package regosched.claims

marks[input.pod.labels.app] := "{pod} runs the same app"

separate contains {"mark": input.pod.labels.app, "rule": "one-per-node"}
`),
	}}
	pol, err := policy.Compile(ctx, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	web := model.NewLabels(map[string]string{"app": "web"})
	bound := &model.Pod{Namespace: "shop", Name: "web-0", UID: "uid-0", Labels: web, Node: "node-1"}
	pending := &model.Pod{Namespace: "shop", Name: "web-1", UID: "uid-1", Labels: web}
	conflicts, err := pol.Conflicts(ctx, &policy.Input{Pod: pending, Peers: []*model.Pod{bound}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range conflicts {
		fmt.Printf("conflict on %s (%s): %s\n", c.Node, c.Rule, c.Reason)
	}
	// Output:
	// conflict on node-1 (one-per-node): shop/web-0 runs the same app
}
