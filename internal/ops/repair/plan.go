package repair

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/redis/redisroles"
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
	keys, c, err := judge.DescribeStanding(ctx, p.pol, pod)
	if err != nil {
		return fmt.Sprintf("the policy cannot describe %s: %v", pod.Key(), err)
	}
	conflicts, _, err := judge.Standing(ctx, p.pol, p.cache, pod, keys, c, changed)
	if err != nil {
		return fmt.Sprintf("the policy cannot judge %s: %v", pod.Key(), err)
	}
	if len(conflicts) == 0 { // Standing gives the conflicts on pod's own node only
		return ""
	}
	role, _ := pod.Labels.Get(p.live.Role)
	return fmt.Sprintf("as %s on node %s, %s would break %s: %s", role, pod.Node, pod.Key(), conflicts[0].Rule, conflicts[0].Reason)
}

// planEvict picks the first candidate that a controller recreates, that
// the policy does not protect (no Redis master), that a PodDisruptionBudget covers when needPDB, and
// whose eviction the API server would allow now (a dry run).
func (p *planner) planEvict(ctx context.Context, s Step, candidates []*model.Pod, needPDB bool, how string) Step {
	var refusals []string
	for _, c := range candidates {
		why := p.evictable(ctx, c, needPDB)
		if why != "" {
			refusals = append(refusals, c.Key()+": "+why)
			continue
		}
		s.Action, s.Target, s.target = Evict, c.Key(), c
		s.Why = how
		if needPDB {
			s.Why += "; a PodDisruptionBudget covers it and allows the disruption now"
		}
		return s
	}
	return none(s, "no pod can be evicted safely: %s", strings.Join(refusals, "; "))
}

func (p *planner) evictable(ctx context.Context, c *model.Pod, needPDB bool) string {
	// The policy's protection, as preemption in both builds reads it: the
	// default policy protects every Redis master (protected_roles).
	switch protected, err := p.pol.Protected(ctx, c); {
	case err != nil:
		return fmt.Sprintf("the policy cannot say whether it is protected: %v", err)
	case protected:
		return "the policy protects it (preemption.protected: a Redis master, say), and regosched never evicts a protected pod"
	}
	if p.kube == nil {
		return "no API server to ask"
	}
	pod, err := p.kube.CoreV1().Pods(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("reading the pod: %v", err)
	}
	if pod.UID != c.UID {
		return "the pod was recreated since the audit pass"
	}
	if metav1.GetControllerOf(pod) == nil {
		return "no controller owns it, so nothing would recreate it"
	}
	if needPDB {
		covered, err := p.covered(ctx, pod)
		if err != nil {
			return fmt.Sprintf("listing PodDisruptionBudgets: %v", err)
		}
		if !covered {
			return "no PodDisruptionBudget covers it, so nothing tells whether its cluster can spare it now (plan only: evict it by hand once the cluster is healthy)"
		}
	}
	if err := evict(ctx, p.kube, c, true); err != nil {
		return fmt.Sprintf("the API server would refuse its eviction now: %v", err)
	}
	return ""
}

// covered reports whether a PodDisruptionBudget of the pod's namespace
// selects it.
func (p *planner) covered(ctx context.Context, pod *corev1.Pod) (bool, error) {
	list, ok := p.pdbs[pod.Namespace]
	if !ok {
		l, err := p.kube.PolicyV1().PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{Limit: 500})
		if err != nil {
			return false, err
		}
		list = l.Items
		p.pdbs[pod.Namespace] = list
	}
	for _, pdb := range list {
		// In policy/v1 an empty selector selects every pod of the
		// namespace, and a missing one none.
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			return true, nil
		}
	}
	return false, nil
}

// evict asks the API server to evict pod, this incarnation only; dryRun
// only asks whether it would.
func evict(ctx context.Context, kube kubernetes.Interface, pod *model.Pod, dryRun bool) error {
	uid := pod.UID
	opts := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	err := kube.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: opts,
	})
	if apierrors.IsTooManyRequests(err) {
		return fmt.Errorf("a PodDisruptionBudget forbids it now: %w", err)
	}
	return err
}
