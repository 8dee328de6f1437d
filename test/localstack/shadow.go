package localstack

import (
	"slices"
	"strings"

	"github.com/regosched/regosched/test/fixture"
)

// ShadowStep is one pod of the shadow rollout's scenario, placed once the
// ones before it are bound, and what the stricter shadow policy
// (policytest.KeepClusterApart) says of it.
type ShadowStep struct {
	Name, Role, Shard string
	// Disagree is the number of candidate nodes the active policy allows
	// and the shadow denies when the pod is filtered.
	Disagree int
}

// Pod is the step's Redis pod of cluster "cache" in ns, for the regosched
// scheduler.
func (s ShadowStep) Pod(ns string) *fixture.PodWrapper {
	return fixture.MakePod().Namespace(ns).Name(s.Name).Redis("cache", s.Role, s.Shard).Schedulable()
}

// ShadowScenario is the shadow rollout's scenario, the same for both
// builds' end-to-end tests: one Redis cluster on two nodes, each pod placed
// after the last is bound. The active (default) policy leaves each pod
// after the first exactly one node, and the shadow (the default plus
// "every two pods of a cluster apart") denies both nodes to every pod once
// a peer stands on each. Its two shards are one master each, then more
// replicas of shard 0 than the nodes could hold apart.
func ShadowScenario() []ShadowStep {
	return []ShadowStep{
		{Name: "cache-0-master", Role: "master", Shard: "0"},                // no peer: the shadow is not asked
		{Name: "cache-0-replica", Role: "replica", Shard: "0"},              // both deny the master's node
		{Name: "cache-1-master", Role: "master", Shard: "1", Disagree: 1},   // the replica's node: the shadow alone denies it
		{Name: "cache-1-replica", Role: "replica", Shard: "1", Disagree: 1}, // the first master's node
		{Name: "cache-0-replica-b", Role: "replica", Shard: "0", Disagree: 1},
		{Name: "cache-0-replica-c", Role: "replica", Shard: "0", Disagree: 1},
	}
}

// ShadowTogether is how the active policy must place ShadowScenario, as
// groups of pods sharing a node (Together), whichever node the first
// master took.
func ShadowTogether() [][]string {
	return [][]string{
		{"cache-0-master", "cache-1-replica"},
		{"cache-0-replica", "cache-0-replica-b", "cache-0-replica-c", "cache-1-master"},
	}
}

// Together groups placed pods (name to node) by node, each group sorted,
// the groups by their first pod.
func Together(placed map[string]string) [][]string {
	byNode := map[string][]string{}
	for pod, node := range placed {
		byNode[node] = append(byNode[node], pod)
	}
	var groups [][]string
	for _, g := range byNode {
		slices.Sort(g)
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return groups
}
