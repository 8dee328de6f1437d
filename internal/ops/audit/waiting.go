package audit

import (
	"context"
	"slices"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// holdWaiting moves out of all the violations of a pod whose role the
// policy reads live from Redis and that the roles controller has not read
// yet (Config.RoleChecked): its role labels, half written or none, are no
// facts yet, and the next pass after the read judges it. It returns the
// violations kept and those held.
func (a *Auditor) holdWaiting(ctx context.Context, pol *policy.Policy, all []collected) (kept, held []collected) {
	if a.roleChecked == nil || len(all) == 0 {
		return all, nil
	}
	waiting := map[*model.Pod]bool{}
	isWaiting := func(p *model.Pod) bool {
		w, ok := waiting[p]
		if !ok {
			w = !a.roleChecked(p.Namespace, p.Name) && readsLive(ctx, pol, p)
			waiting[p] = w
		}
		return w
	}
	kept = all[:0:0]
	for _, c := range all {
		if slices.ContainsFunc(c.found.pods[:], func(p *model.Pod) bool { return p != nil && isWaiting(p) }) {
			held = append(held, c)
			continue
		}
		kept = append(kept, c)
	}
	return kept, held
}

// readsLive reports whether pol reads pod's role from Redis; an error says
// no, so that the violation is reported rather than hidden.
func readsLive(ctx context.Context, pol *policy.Policy, pod *model.Pod) bool {
	ctx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	defer cancel()
	sources, err := pol.LiveRoles(ctx, pod)
	return err == nil && slices.ContainsFunc(sources, func(s policy.LiveSource) bool { return s.Source == "redis" })
}
