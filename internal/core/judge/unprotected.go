package judge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Reasons a rule per topology domain cannot protect a pod, beside the
// policy's own (policy.Unprotected): facts of the cluster, not of the pod.
const (
	// NoTopologyLabel: the pod's node lacks the label of a key its rules
	// keep it apart by; in no domain of that key, no such rule holds there.
	NoTopologyLabel = "no_topology_label"
	// ZonesUnavailable: the nodes make up fewer than two domains of a key
	// its rules keep it apart by, so no placement can meet them.
	ZonesUnavailable = "zones_unavailable"
	// QuorumUnprotectable: its group cannot keep a majority through the
	// loss of any one domain, over the domains there are.
	QuorumUnprotectable = "quorum_unprotectable"
)

// Unprotected is why no hard rule (or only part of them) protects pod:
// the policy's reasons, then those of its rules per domain in view's
// cluster. pod is as it stands (on its node) or pending (no node: its
// node's labels are not judged).
func Unprotected(ctx context.Context, pol *policy.Policy, view PeerView, pod *model.Pod) ([]policy.Unprotected, error) {
	why, err := pol.Unprotected(ctx, pod)
	if err != nil {
		return nil, err
	}
	keys, c, err := DescribeStand(ctx, pol, pod)
	if err != nil || c == nil {
		return why, err
	}
	var labels map[string]string
	if pod.Node != "" {
		labels, _ = view.NodeLabels(pod.Node)
	}
	seen := map[string]bool{}
	add := func(reason, message string) {
		if !seen[reason+message] {
			seen[reason+message] = true
			why = append(why, policy.Unprotected{Reason: reason, Message: message})
		}
	}
	domainKey := func(key string) {
		if key == model.HostnameKey {
			return
		}
		if _, ok := labels[key]; pod.Node != "" && !ok {
			add(NoTopologyLabel, fmt.Sprintf("node %s has no label %s: the rules kept per %s do not hold there", pod.Node, key, model.KeyWord(key)))
		}
		if n := view.Domains(key); n < 2 {
			add(ZonesUnavailable, fmt.Sprintf("the nodes make up %d %s (label %s): the rules kept per %s need two", n, plural(n, model.KeyWord(key)), key, model.KeyWord(key)))
		}
	}
	for _, s := range c.Separate() {
		domainKey(s.TopologyKey)
	}
	for _, cp := range c.Caps() {
		domainKey(cp.TopologyKey)
		members := []*model.Pod{pod}
		for _, p := range view.Peers(keys, pod.UID) {
			if p.Claims != nil {
				if _, ok := p.Claims.What(cp.Mark); ok {
					members = append(members, p)
				}
			}
		}
		size := policy.GroupSize(cp, members, view.Replicas)
		if n := view.Domains(cp.TopologyKey); size >= 3 && n >= 2 && !policy.Feasible(cp, size, n) {
			add(QuorumUnprotectable, fmt.Sprintf("%s: a group of %d cannot keep %s over %d %s", cp.Rule, size, capLimitWords(cp), n, plural(n, model.KeyWord(cp.TopologyKey))))
		}
	}
	slices.SortStableFunc(why, func(a, b policy.Unprotected) int { return strings.Compare(a.Reason, b.Reason) })
	return why, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// capLimitWords says what a cap keeps, for a reason.
func capLimitWords(c model.Cap) string {
	if c.Quorum {
		return "fewer than half per " + model.KeyWord(c.TopologyKey)
	}
	return fmt.Sprintf("at most %d per %s", c.Max, model.KeyWord(c.TopologyKey))
}
