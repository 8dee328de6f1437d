package judge

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Edits are a preemption dry run's changes to a pod's peers: peers taken
// off their node (victims), and pods put on one that were no peer when the
// pod was filtered (nominated pods, not bound yet), with their conflicts.
// The zero value edits nothing.
type Edits struct {
	removed map[types.UID]bool
	added   map[types.UID][]model.Conflict
}

// Clone copies e, for a dry run's copy of the cycle.
func (e Edits) Clone() Edits {
	return Edits{removed: maps.Clone(e.removed), added: maps.Clone(e.added)}
}

// Remove takes the pod uid off its node: its conflicts no longer count.
func (e *Edits) Remove(f *Filtered, uid types.UID) {
	if _, ok := f.Subject.Peer(uid); ok {
		if e.removed == nil {
			e.removed = map[types.UID]bool{}
		}
		e.removed[uid] = true
	}
	delete(e.added, uid)
}

// Add puts obj on node: a peer removed before counts again (a victim
// reprieved); a pending pod that shares a group with f's pod is judged
// now (a nominated pod). A bound pod that was no peer is in none of the
// pod's groups: the placements index every bound pod of a group.
func (e *Edits) Add(ctx context.Context, f *Filtered, obj *v1.Pod, node *v1.Node) error {
	s := f.Subject
	if _, ok := s.Peer(obj.UID); ok {
		delete(e.removed, obj.UID)
		return nil
	}
	if obj.Spec.NodeName != "" || obj.UID == s.Pod.UID || node == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	nominated := model.PodFromObject(obj)
	nominated.Node = node.Name
	peer, ok, err := AsPeer(ctx, s, nominated)
	if err != nil || !ok {
		return err
	}
	in := &policy.Input{Pod: s.Pod, Peers: []*model.Pod{peer}, Nodes: map[string]map[string]string{node.Name: node.Labels}}
	conflicts, err := s.Policy.Conflicts(ctx, in)
	if err != nil {
		return fmt.Errorf("judging nominated pod %s: %w", peer.Key(), err)
	}
	if len(conflicts) > 0 {
		if e.added == nil {
			e.added = map[types.UID][]model.Conflict{}
		}
		e.added[obj.UID] = conflicts
	}
	return nil
}

// Refuses reports whether f, under the edits e, may refuse any node at
// all: the plugin's Filter asks it first for every node, so a pod with no
// conflicts costs one branch.
func (f *Filtered) Refuses(e *Edits) bool {
	return f.Verdict.HasConflicts() || len(e.added) > 0
}

// Decide is the filter phase's answer for one node under the edits e:
// the refusal, and whether there is one.
func (f *Filtered) Decide(node string, e *Edits) (Refusal, bool) {
	if !f.Refuses(e) {
		return Refusal{}, false
	}
	var cs []model.Conflict
	for _, c := range f.Verdict.At(node) {
		if !e.removed[c.Peer] {
			cs = append(cs, c)
		}
	}
	resolvable := f.Verdict.Preemptible(node, func(uid types.UID) bool { return e.removed[uid] })
	var labels map[string]string // read once, if a conflict is per zone
	for _, added := range e.added {
		for _, c := range added {
			if !c.Domain.OnNode() && labels == nil && f.Verdict.cluster != nil {
				labels, _ = f.Verdict.cluster.NodeLabels(node)
			}
			if c.Domain.Holds(node, labels) {
				// A nominated pod is not bound: there is nothing to evict.
				cs = append(cs, c)
				resolvable = false
			}
		}
	}
	if len(cs) == 0 {
		return Refusal{}, false
	}
	return Refusal{Index: -1, Node: node, Resolvable: resolvable, Conflicts: cs}, true
}

// ReasonLines is r's reasons one per line, as the framework's status takes
// them.
func (r Refusal) ReasonLines() []string {
	lines := make([]string, 0, len(r.Conflicts))
	for _, c := range r.Conflicts {
		lines = append(lines, c.Reason)
	}
	slices.Sort(lines)
	return slices.Compact(lines)
}
