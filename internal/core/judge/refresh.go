package judge

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/internal/core/model"
)

// MaxRefresh bounds the API reads of one Refresh. A peer deleted or
// relabelled just before the scheduler retries the pod it blocked is the
// case Refresh serves, and a pod conflicts with a peer or two per node; a
// few reads find it, and more would spend the budget binds share.
const MaxRefresh = 8

// Refresh re-reads from the API server the peers of s that suspect picks,
// and reports whether any was stale, in which case s's peers now hold the
// fresh view. The front ends pick differently, from what each knows:
// regosched-scheduler suspects the conflicting peers its scheduler's
// snapshot disagrees about; the extender, which has no second view,
// suspects the conflicting peers when every candidate was refused.
//
// Why: deleting a peer (a preemption victim, say) or relabelling it (a
// failover) makes kube-scheduler retry the pods it blocked at once, often
// before the placement cache has seen the change. Refusing then would
// park the pod as unschedulable, or have preemption pick a second victim.
//
// What is stale is decided here once:
//   - gone, replaced (another UID), bound to another node, or finished:
//     dropped;
//   - relabelled: described again under s's policy with its new labels,
//     and dropped when it shares no group with s any more;
//   - not bound yet: kept. The cache holds such a pod only as a placement
//     recorded before its binding (Reserve, the bind verb), which binds it
//     once its call returns; dropping it would judge against a laxer view
//     than the truth.
//   - unreadable (any other error, or the read budget spent): kept, as the
//     cache has it.
func (j *Judge) Refresh(ctx context.Context, s *Subject, suspect func(*model.Pod) bool) bool {
	if j.cfg.Client == nil {
		return false
	}
	fresh := make([]*model.Pod, 0, len(s.Peers))
	stale, reads := false, 0
	for _, p := range s.Peers {
		if !suspect(p) || reads >= MaxRefresh || !j.refreshReads.TryAccept() {
			fresh = append(fresh, p)
			continue
		}
		reads++
		obj, err := j.cfg.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			stale = true
		case err != nil:
			fresh = append(fresh, p)
		case obj.UID != p.UID || (obj.Spec.NodeName != "" && obj.Spec.NodeName != p.Node) ||
			obj.Status.Phase == v1.PodSucceeded || obj.Status.Phase == v1.PodFailed:
			stale = true
		case model.NewLabels(obj.Labels) != p.Labels:
			stale = true
			if q := j.redescribe(ctx, s, p, obj); q != nil {
				fresh = append(fresh, q)
			}
		default:
			fresh = append(fresh, p)
		}
	}
	if stale {
		j.cfg.Log.WithField("pod", s.Pod.Key()).Debug("placement cache was behind the API; judged again on fresh peers")
		s.SetPeers(fresh)
	}
	return stale
}

// redescribe is the peer p as obj, the API server's copy, has it now: nil
// when it is no peer of s any more. A description that fails keeps the
// cache's copy: a guess never replaces a fact.
func (j *Judge) redescribe(ctx context.Context, s *Subject, p *model.Pod, obj *v1.Pod) *model.Pod {
	q := model.PodFromObject(obj)
	q.Node = p.Node
	peer, ok, err := AsPeer(ctx, s, q)
	if err != nil {
		j.cfg.Log.WithError(err).WithField("peer", p.Key()).Warn("describing a relabelled peer; judged as the cache has it")
		return p
	}
	if !ok {
		return nil
	}
	return peer
}
