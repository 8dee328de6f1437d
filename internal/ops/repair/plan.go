package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/audit"
)

// Step is the repair of one violation: an action and why it is safe, or
// no action and why none is.
type Step struct {
	Violation audit.Violation `json:"violation"`
	// Cluster is the group both pods belong to (entry/namespace/cluster):
	// one repair at a time acts on it.
	Cluster string `json:"cluster"`
	Action  Action `json:"action"`
	// Target is the pod acted on (namespace/name): the replica sent
	// CLUSTER FAILOVER, or the pod evicted.
	Target string `json:"target,omitempty"`
	Why    string `json:"why"`
	// Checked is true when Redis confirmed the facts just now (serve); a
	// plan made without asking Redis (the CLI) says what will be checked.
	Checked bool `json:"checked"`

	target *model.Pod
	// redis is true when the pods are Redis servers: an action on them
	// waits for Redis to confirm the facts (Checked).
	redis bool
	// settle is the least time since the cluster's last role change
	// before a failover can win the votes it needs (live.voteWindow).
	settle time.Duration
}

// planner plans the steps of one pass.
type planner struct {
	pol   *policy.Policy
	cache audit.Placements
	// indexed is the cache's placed pods as the pass found them; byName
	// indexes them by namespace/name once a violation needs it.
	indexed []placement.Indexed
	byName  map[string]placement.Indexed
	// live are the policy's live role labels; liveOK is false when it
	// reads no role live.
	live   policy.LiveLabels
	liveOK bool
	// redis is nil when roles are not read from Redis (no --redis-roles,
	// or the CLI): then nothing Redis says can be confirmed.
	redis  Redis
	kube   kubernetes.Interface
	maxLag int64
	// pdbs caches each namespace's PodDisruptionBudgets for the pass.
	pdbs map[string][]policyv1.PodDisruptionBudget
}

func newPlanner(pol *policy.Policy, cache audit.Placements, r Redis, kube kubernetes.Interface, maxLag int64) *planner {
	p := &planner{pol: pol, cache: cache, redis: r, kube: kube, maxLag: maxLag,
		indexed: cache.Indexed(), pdbs: map[string][]policyv1.PodDisruptionBudget{}}
	p.live, p.liveOK = pol.LiveLabels()
	return p
}

// placed returns the placed pod namespace/name with its groups.
func (p *planner) placed(name string) (placement.Indexed, bool) {
	if p.byName == nil {
		p.byName = make(map[string]placement.Indexed, len(p.indexed))
		for _, x := range p.indexed {
			p.byName[x.Pod.Key()] = x
		}
	}
	x, ok := p.byName[name]
	return x, ok
}

func none(s Step, format string, args ...any) Step {
	s.Action, s.Target, s.target, s.Why = None, "", nil, fmt.Sprintf(format, args...)
	return s
}

// plan chooses the repair of v.
func (p *planner) plan(ctx context.Context, v audit.Violation) Step {
	s := Step{Violation: v}
	if len(v.Pods) != 2 {
		return none(s, "the violation names %d pods, not two", len(v.Pods))
	}
	a, okA := p.placed(v.Pods[0])
	b, okB := p.placed(v.Pods[1])
	if !okA || !okB {
		return none(s, "a pod of the violation is no longer placed: the next audit pass tells")
	}
	s.Cluster = sharedKey(a.Keys, b.Keys)
	redisA, errA := p.readLive(ctx, a.Pod)
	redisB, errB := p.readLive(ctx, b.Pod)
	if err := errors.Join(errA, errB); err != nil {
		return none(s, "the policy cannot tell which pods are Redis: %v", err)
	}
	if redisA || redisB {
		if !redisA || !redisB {
			return none(s, "only one of the pods is a Redis server whose role is read live: no repair of regosched's own")
		}
		return p.planRedis(ctx, s, a.Pod, b.Pod)
	}
	return p.planEvict(ctx, s, []*model.Pod{b.Pod, a.Pod}, true,
		"evicting it through the Eviction API; its controller recreates it and regosched places it elsewhere")
}

// clusterOf is the group both pods of v belong to, or "" while either is
// not placed.
func (p *planner) clusterOf(v audit.Violation) string {
	if len(v.Pods) != 2 {
		return ""
	}
	a, okA := p.placed(v.Pods[0])
	b, okB := p.placed(v.Pods[1])
	if !okA || !okB {
		return ""
	}
	return sharedKey(a.Keys, b.Keys)
}

// sharedKey is the first group of a that b shares.
func sharedKey(a, b []string) string {
	for _, k := range slices.Sorted(slices.Values(a)) {
		if slices.Contains(b, k) {
			return k
		}
	}
	return ""
}

// readLive reports whether the policy reads pod's role from Redis.
func (p *planner) readLive(ctx context.Context, pod *model.Pod) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	sources, err := p.pol.LiveRoles(ctx, pod)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(sources, func(s policy.LiveSource) bool { return s.Source == "redis" }), nil
}

func (p *planner) roleOf(pod *model.Pod) (role, shard string) {
	role, _ = pod.Labels.Get(p.live.Role)
	shard, _ = pod.Labels.Get(p.live.Shard)
	return role, shard
}
