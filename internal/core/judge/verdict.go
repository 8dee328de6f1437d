package judge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Verdict is the hard and soft rules' answer for a subject: the conflicts
// by domain, and the penalties.
type Verdict struct {
	Subject   *Subject
	Penalties []model.Penalty
	// raw are the hard rules' conflicts as the policy gave them; conflicts
	// holds those per node by node (a handful of nodes, asked about every
	// candidate, thousands) and domains the others by domain, indexed on
	// first use: a prioritize call that wants the penalties alone never
	// builds it.
	raw       []model.Conflict
	once      sync.Once
	conflicts fewNodes[[]model.Conflict]
	domains   []keyedConflicts
	// cluster gives the labels of a node asked about, for the conflicts per
	// domain of a key other than the hostname.
	cluster policy.Cluster
	// zonesYield: the conflicts per domain (zone) no longer count
	// (YieldZones).
	zonesYield bool
	// evictable says, of each peer in conflict, whether preemption may
	// evict it (WeighPreemption).
	evictable map[types.UID]bool
}

// conflicts evaluates the hard rules alone.
func (j *Judge) conflicts(ctx context.Context, s *Subject) (*Verdict, error) {
	v := &Verdict{Subject: s, cluster: j.cfg.Placements}
	if len(s.Peers) == 0 {
		return v, nil
	}
	conflicts, err := s.Policy.Conflicts(ctx, policy.NewInput(s.Pod, s.Peers, j.cfg.Placements))
	if err != nil {
		return nil, fmt.Errorf("judging pod %s: %w", s.Pod.Key(), err)
	}
	v.setConflicts(conflicts)
	return v, nil
}

func (v *Verdict) setConflicts(conflicts []model.Conflict) { v.raw = conflicts }

// keyedConflicts are the conflicts per domain of one topology key, by
// the domain's value.
type keyedConflicts struct {
	key    string
	values map[string][]model.Conflict
}

// index builds the conflicts by domain, once; safe from many goroutines.
func (v *Verdict) index() {
	v.once.Do(func() {
		byNode := make(map[string][]model.Conflict, len(v.raw))
		for _, c := range v.raw {
			if c.Domain.OnNode() {
				byNode[c.Domain.Value] = append(byNode[c.Domain.Value], c)
				continue
			}
			i := slices.IndexFunc(v.domains, func(k keyedConflicts) bool { return k.key == c.Domain.Key })
			if i < 0 {
				i = len(v.domains)
				v.domains = append(v.domains, keyedConflicts{c.Domain.Key, map[string][]model.Conflict{}})
			}
			v.domains[i].values[c.Domain.Value] = append(v.domains[i].values[c.Domain.Value], c)
		}
		v.conflicts = newFewNodes(byNode)
	})
}

// HasConflicts reports whether any node is turned away.
func (v *Verdict) HasConflicts() bool { return len(v.raw) > 0 }

// Conflicts are the hard rules' conflicts, every domain's.
func (v *Verdict) Conflicts() []model.Conflict { return v.raw }

// At returns the conflicts of the node named node: those on it, and those
// of the domains its labels (the cluster's) put it in.
func (v *Verdict) At(node string) []model.Conflict { return v.at(node, nil, false) }

// PerDomain reports whether any conflict is per domain of a key other
// than the hostname (a zone): only then are a node's labels read, and may
// the rules per zone have to yield (YieldZones).
func (v *Verdict) PerDomain() bool {
	if len(v.raw) == 0 {
		return false
	}
	v.index()
	return len(v.domains) > 0
}

// at is At with node's labels given (own): the request's own node, which
// the cluster's view may not hold yet.
func (v *Verdict) at(node string, labels map[string]string, own bool) []model.Conflict {
	if len(v.raw) == 0 {
		return nil
	}
	v.index()
	cs, _ := v.conflicts.get(node)
	if len(v.domains) == 0 || v.zonesYield {
		return cs
	}
	l := labels
	if !own && v.cluster != nil {
		l, _ = v.cluster.NodeLabels(node)
	}
	for _, k := range v.domains {
		if value, ok := l[k.key]; ok {
			if in := k.values[value]; len(in) > 0 {
				cs = append(slices.Clip(cs), in...)
			}
		}
	}
	return cs
}

// Domains calls f for every domain with conflicts (a node for the rules
// per node), in no order.
func (v *Verdict) Domains(f func(d model.Domain, cs []model.Conflict)) {
	if len(v.raw) == 0 {
		return
	}
	v.index()
	for node, cs := range v.conflicts.m {
		f(model.Domain{Key: model.HostnameKey, Value: node}, cs)
	}
	for _, k := range v.domains {
		for value, cs := range k.values {
			f(model.Domain{Key: k.key, Value: value}, cs)
		}
	}
}

// Denied is every node of nodes the hard rules turn away, with its
// reasons (Reasons); nil when none is.
func (v *Verdict) Denied(nodes []string) map[string]string {
	var denied map[string]string
	if len(v.raw) == 0 {
		return nil
	}
	for _, node := range nodes {
		if cs := v.At(node); len(cs) > 0 {
			if denied == nil {
				denied = map[string]string{}
			}
			denied[node] = Reasons(cs)
		}
	}
	return denied
}

// weighPreemption works out, for every peer in conflict, whether
// preemption may evict it (Evictable), so that Preemptible, which a
// framework calls for many nodes at once, only reads.
func (j *Judge) weighPreemption(ctx context.Context, v *Verdict) error {
	if !v.HasConflicts() {
		return nil
	}
	v.evictable = make(map[types.UID]bool, len(v.raw))
	for _, c := range v.raw {
		if _, done := v.evictable[c.Peer]; done {
			continue
		}
		var err error
		if v.evictable[c.Peer], err = j.Evictable(ctx, v.Subject, c.Peer); err != nil {
			return err
		}
	}
	return nil
}

// Preemptible reports whether preemption can resolve the conflicts of
// node: every conflicting peer (but those removed, as a preemption dry
// run removes victims) stands on node itself and is evictable, as
// weighPreemption found. A peer elsewhere in the node's zone is no victim
// that preempting on node may evict. The
// extender and the plugin once differed on protection: the extender left
// protected peers to its preempt verb, and the plugin let default
// preemption evict them; one answer, here, keeps both from trying.
func (v *Verdict) Preemptible(node string, removed func(types.UID) bool) bool {
	return v.preemptible(node, v.At(node), removed)
}

// preemptible is Preemptible for node's conflicts cs.
func (v *Verdict) preemptible(node string, cs []model.Conflict, removed func(types.UID) bool) bool {
	for _, c := range cs {
		if removed != nil && removed(c.Peer) {
			continue
		}
		if c.Node != node || !v.evictable[c.Peer] {
			return false
		}
	}
	return true
}

// Evictable reports whether preemption for s may evict the pod uid: a pod
// the placements do not hold cannot be judged and is not, a pod of equal
// or higher priority is not, nor is one the policy protects.
func (j *Judge) Evictable(ctx context.Context, s *Subject, uid types.UID) (bool, error) {
	p, ok := s.Peer(uid)
	if !ok || p.Priority >= s.Pod.Priority {
		return false, nil
	}
	protected, err := j.Protected(ctx, s, uid)
	return !protected, err
}

// Protected asks the policy whether the pod uid must not be evicted. Only
// pods the placements hold (members of a group) can be: the policy knows
// nothing of the others. Answers are kept in s.
func (j *Judge) Protected(ctx context.Context, s *Subject, uid types.UID) (bool, error) {
	s.mu.Lock()
	v, ok := s.protected[uid]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	pod, ok := s.Peer(uid)
	if !ok {
		if pod, ok = j.cfg.Placements.PodByUID(uid); !ok {
			return false, nil
		}
	}
	v, err := s.Policy.Protected(ctx, pod)
	if err != nil {
		return false, fmt.Errorf("asking whether %s is protected: %w", pod.Key(), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.protected == nil {
		s.protected = map[types.UID]bool{}
	}
	s.protected[uid] = v
	return v, nil
}

// Reasons gives one line per distinct reason of cs, in a stable order.
func Reasons(cs []model.Conflict) string {
	reasons := make([]string, len(cs))
	for i, c := range cs {
		reasons[i] = c.Reason
	}
	return joinReasons(reasons)
}

// joinReasons sorts reasons, drops repeats and joins them with "; ".
func joinReasons(reasons []string) string {
	reasons = slices.Clone(reasons)
	slices.Sort(reasons)
	return strings.Join(slices.Compact(reasons), "; ")
}
