package repair

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/redis/redisroles"
)

func (p *planner) planRedis(ctx context.Context, s Step, a, b *model.Pod) Step {
	s.redis = true
	if !p.liveOK {
		return none(s, "the policy writes no live role labels")
	}
	roleA, shardA := p.roleOf(a)
	roleB, shardB := p.roleOf(b)
	for _, x := range []struct {
		pod  *model.Pod
		role string
	}{{a, roleA}, {b, roleB}} {
		if x.role != redisroles.Master && x.role != redisroles.Replica {
			return none(s, "the role of %s is unknown (label %s=%q): regosched acts on known roles only", x.pod.Key(), p.live.Role, x.role)
		}
	}
	switch {
	case roleA == redisroles.Master && roleB == redisroles.Master:
		if shardA == "" || shardB == "" {
			return none(s, "two masters outside Redis Cluster (no shard label): Sentinel or the operator chooses the master, not regosched")
		}
		return p.planFailover(ctx, s, a, b)
	case roleA == redisroles.Replica && roleB == redisroles.Replica:
		return none(s, "both pods are replicas: regosched repairs masters placed together and masters beside their own replicas")
	}
	m, r, shardM, shardR := a, b, shardA, shardB
	if roleA == redisroles.Replica {
		m, r, shardM, shardR = b, a, shardB, shardA
	}
	if (shardM == "") != (shardR == "") {
		unknown := m
		if shardR == "" {
			unknown = r
		}
		return none(s, "the shard of %s is unknown (label %s): regosched acts on known shards only", unknown.Key(), p.live.Shard)
	}
	if shardM != shardR {
		return none(s, "replica %s serves another shard (%q) than master %s (%q): no repair of regosched's own", r.Key(), shardR, m.Key(), shardM)
	}
	if p.redis != nil {
		if _, why := p.confirm(ctx, m, redisroles.Master, shardM); why != "" {
			return none(s, "%s", why)
		}
		if _, why := p.confirm(ctx, r, redisroles.Replica, shardR); why != "" {
			return none(s, "%s", why)
		}
		s.Checked = true
	}
	return p.planEvict(ctx, s, []*model.Pod{r}, false,
		fmt.Sprintf("evicting replica %s, not master %s, through the Eviction API; its controller recreates it and regosched keeps it off its master's node", r.Key(), m.Key()))
}

// confirm asks pod's Redis whether it has role and shard now; it returns
// what Redis said, and why not, or "".
func (p *planner) confirm(ctx context.Context, pod *model.Pod, role, shard string) (live, string) {
	l, err := ask(ctx, p.redis, pod)
	if err != nil {
		return live{}, fmt.Sprintf("Redis of %s does not answer (%v): regosched does not act on uncertain answers", pod.Key(), err)
	}
	return l, behind(pod, l, role, shard)
}

// behind says how the labels of pod are behind what Redis said, or "".
func behind(pod *model.Pod, l live, role, shard string) string {
	if l.role.Role != role || l.role.Shard != shard {
		return fmt.Sprintf("the labels of %s say %s of %q but Redis says %s of %q just now: waiting for the labels to catch up",
			pod.Key(), role, shard, l.role.Role, l.role.Shard)
	}
	return ""
}

// planFailover picks, of the two masters on one node, one whose replica
// stands elsewhere, is in sync, and can be master there without breaking a
// hard rule.
func (p *planner) planFailover(ctx context.Context, s Step, m1, m2 *model.Pod) Step {
	masters := [2]*model.Pod{m1, m2}
	var said [2]live // what each master's Redis says, when asked
	if p.redis != nil {
		for i, m := range masters {
			_, shard := p.roleOf(m)
			l, why := p.confirm(ctx, m, redisroles.Master, shard)
			if why != "" {
				return none(s, "%s", why)
			}
			said[i] = l
		}
	}
	var refusals []string
	for i, m := range masters {
		other, lm := masters[1-i], said[i]
		_, shard := p.roleOf(m)
		replicas := p.replicasOf(s.Cluster, shard)
		if len(replicas) == 0 {
			refusals = append(refusals, fmt.Sprintf("master %s has no placed replica", m.Key()))
		}
		for _, r := range replicas {
			why, settle := p.canTakeOver(ctx, r, m, other, lm)
			if why != "" {
				refusals = append(refusals, fmt.Sprintf("replica %s cannot take over from %s: %s", r.Key(), m.Key(), why))
				continue
			}
			s.Action, s.Target, s.target, s.settle = Failover, r.Key(), r, settle
			s.Checked = p.redis != nil
			s.Why = fmt.Sprintf("replica %s on node %s takes shard %q over from master %s by a graceful CLUSTER FAILOVER (no data moves; %s stays as its replica); "+
				"as master on %s it breaks no hard rule", r.Key(), r.Node, shard, m.Key(), m.Key(), r.Node)
			if !s.Checked {
				s.Why += "; before acting, the leader asks Redis to confirm the roles, cluster_state:ok with every slot covered, and the replica in sync"
			}
			return s
		}
	}
	return none(s, "no replica can take over: %s", strings.Join(refusals, "; "))
}

// replicasOf returns the placed replicas of shard in cluster, by name.
func (p *planner) replicasOf(cluster, shard string) []*model.Pod {
	var out []*model.Pod
	for _, x := range p.indexed {
		if x.Pod.Node == "" || !slices.Contains(x.Keys, cluster) {
			continue
		}
		if role, sh := p.roleOf(x.Pod); role == redisroles.Replica && sh == shard {
			out = append(out, x.Pod)
		}
	}
	slices.SortFunc(out, func(a, b *model.Pod) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// canTakeOver says why replica r may not become master in m's place, or
// "": it stands on another node than both masters, breaks no hard rule as
// a master there (nor does m as a replica where m stands), and, when Redis
// can be asked, confirms its role, sees a healthy cluster and is in sync.
func (p *planner) canTakeOver(ctx context.Context, r, m, other *model.Pod, lm live) (string, time.Duration) {
	if r.Node == m.Node || r.Node == other.Node {
		return fmt.Sprintf("it stands on node %s too", r.Node), 0
	}
	promoted := p.withRole(ctx, r, redisroles.Master)
	demoted := p.withRole(ctx, m, redisroles.Replica)
	if promoted == nil || demoted == nil {
		return "the policy cannot describe the pods in their new roles", 0
	}
	changed := map[types.UID]*model.Pod{r.UID: promoted, m.UID: demoted}
	for _, x := range []*model.Pod{promoted, demoted} {
		if why := p.wouldBreak(ctx, x, changed); why != "" {
			return why, 0
		}
	}
	if p.redis == nil {
		return "", live{}.voteWindow()
	}
	lr, err := ask(ctx, p.redis, r)
	if err != nil {
		return fmt.Sprintf("its Redis does not answer (%v)", err), 0
	}
	_, shard := p.roleOf(m)
	if why := behind(r, lr, redisroles.Replica, shard); why != "" {
		return why, 0
	}
	if why := clusterHealthy(lr); why != "" {
		return why, 0
	}
	return inSync(lr, lm, p.maxLag), lr.voteWindow()
}

// withRole is pod with its role label set to role, described as a peer by
// the policy; nil when the policy fails.
func (p *planner) withRole(ctx context.Context, pod *model.Pod, role string) *model.Pod {
	m := maps.Collect(pod.Labels.All())
	m[p.live.Role] = role
	out := *pod
	out.Labels = model.NewLabels(m)
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	_, c, err := p.pol.DescribePeer(ctx, &out)
	if err != nil {
		return nil
	}
	out.Claims = c
	return &out
}

// wouldBreak judges pod on its node as filter would, among its peers with
// the changed ones in their new form; it returns the first broken rule, or "".
func (p *planner) wouldBreak(ctx context.Context, pod *model.Pod, changed map[types.UID]*model.Pod) string {
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	keys, c, err := judge.DescribeStand(ctx, p.pol, pod)
	if err != nil {
		return fmt.Sprintf("the policy cannot describe %s: %v", pod.Key(), err)
	}
	conflicts, _, err := judge.Stand(ctx, p.pol, p.cache, pod, keys, c, changed)
	if err != nil {
		return fmt.Sprintf("the policy cannot judge %s: %v", pod.Key(), err)
	}
	if len(conflicts) == 0 { // Standing gives the conflicts on pod's own node only
		return ""
	}
	role, _ := pod.Labels.Get(p.live.Role)
	return fmt.Sprintf("as %s on node %s, %s would break %s: %s", role, pod.Node, pod.Key(), conflicts[0].Rule, conflicts[0].Reason)
}
