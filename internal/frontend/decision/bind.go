package decision

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// ErrRefused wraps a bind that would break a hard rule, or that regosched
// may not make (unknown node, a pod of another scheduler).
var ErrRefused = errors.New("refused")

// errBoundAlready says the pod is bound to the asked node already.
var errBoundAlready = errors.New("bound already")

// errPolicyChanged is the core's judge.ErrPolicyChanged: its groups may
// not be the index's any more.
var errPolicyChanged = judge.ErrPolicyChanged

// maxPolicyChanges bounds how often one bind is judged again because the
// policy changed under it; reloads are seconds apart, so a second attempt
// nearly always settles it.
const maxPolicyChanges = 3

// Bind binds a pod to the node the scheduler chose, after a commit-time
// check: under the lock of the pod's groups, the pod is judged against the
// cache plus every placement accepted but not yet seen by the informer. A
// bind that would break a hard rule is refused (the scheduler then puts the
// pod back in its queue). An accepted placement is recorded before the API
// binding is even sent, so the next peer's decision sees it at once.
func (d *Decider) Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error {
	if d.opts.DecisionLog == nil {
		return d.bind(ctx, args, nil)
	}
	rec := &bindRecord{start: time.Now()}
	err := d.bind(ctx, args, rec)
	d.logBind(rec, args, err)
	return err
}

// bind is Bind; rec, when not nil, gathers what the decision log says of it.
func (d *Decider) bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs, rec *bindRecord) error {
	name := args.PodNamespace + "/" + args.PodName
	if d.opts.SchedulerName == "" {
		d.binds.WithLabelValues("refused").Inc()
		return fmt.Errorf("%w: binding %s: no scheduler name is configured, so no pod can be told to be the profile's", ErrRefused, name)
	}
	if _, ok := d.placements.NodeLabels(args.Node); !ok {
		d.binds.WithLabelValues("refused").Inc()
		return fmt.Errorf("%w: binding %s: node %q is not known to regosched", ErrRefused, name, args.Node)
	}
	ectx, cancel := d.evalContext(ctx)
	defer cancel()
	placed, err := d.judgeBind(ectx, args, rec)
	if err != nil {
		if errors.Is(err, errBoundAlready) {
			return nil
		}
		return d.evalError(ectx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName}}, err)
	}

	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName, UID: args.PodUID},
		Target:     v1.ObjectReference{Kind: "Node", Name: args.Node},
	}
	if err := d.opts.Client.CoreV1().Pods(args.PodNamespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return d.bindFailed(ctx, args, placed, err)
	}
	d.binds.WithLabelValues("bound").Inc()
	d.log.WithFields(map[string]any{"pod": name, "node": args.Node}).Debug("bound")
	return nil
}

// judgeBind is Bind's decision, with ctx bounding the policy's evaluations:
// the placement recorded, or why not (errBoundAlready: nothing to do).
func (d *Decider) judgeBind(ctx context.Context, args *extenderv1.ExtenderBindingArgs, rec *bindRecord) (*model.Pod, error) {
	for attempt := 1; ; attempt++ {
		pol := d.policies.Load()
		if pol == nil {
			return nil, ErrNoPolicy
		}
		if rec != nil {
			rec.policy = pol
		}
		pod, keys, err := d.bindSubject(ctx, pol, args)
		if errors.Is(err, errBoundAlready) {
			d.binds.WithLabelValues("bound").Inc()
			return nil, err
		}
		if errors.Is(err, ErrRefused) {
			d.binds.WithLabelValues("refused").Inc()
			return nil, err
		}
		if err != nil {
			d.binds.WithLabelValues("error").Inc()
			return nil, err
		}
		placed, err := d.commit(ctx, pol, pod, keys, args, rec)
		if errors.Is(err, errPolicyChanged) {
			if attempt < maxPolicyChanges {
				continue // judged again, under the policy now active
			}
			d.binds.WithLabelValues("error").Inc() // commit counts its other errors itself
		}
		return placed, err
	}
}

// verifyTimeout bounds the read that settles a failed binding; it is
// counted from the failure, since the scheduler's own timeout may already
// have cancelled the request's context.
const verifyTimeout = 5 * time.Second

// bindFailed settles a binding that returned err. The binding may have
// committed all the same (a timeout, a dropped connection, a 5xx), so the
// pod is read again with a context the request's cancellation does not
// reach: bound to the node means success; bound elsewhere, replaced or
// gone, or a refusal the API server is sure of, takes the placement back.
// Anything else is ambiguous, and the placement stays until the informer
// confirms it or the in-flight TTL passes, so that peers are never decided
// against a view laxer than the truth.
func (d *Decider) bindFailed(ctx context.Context, args *extenderv1.ExtenderBindingArgs, placed *model.Pod, err error) error {
	name := args.PodNamespace + "/" + args.PodName
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
	defer cancel()
	current, getErr := d.opts.Client.CoreV1().Pods(args.PodNamespace).Get(vctx, args.PodName, metav1.GetOptions{})
	switch {
	case getErr == nil && current.UID == args.PodUID && current.Spec.NodeName == args.Node:
		// It went through: a retried bind, or a reply lost on the way back.
		d.binds.WithLabelValues("bound").Inc()
		d.log.WithFields(logrus.Fields{"pod": name, "node": args.Node, "error": err.Error()}).Info("bound although the binding call failed")
		return nil
	case getErr == nil && (current.UID != args.PodUID || current.Spec.NodeName != "" || definitive(err)),
		apierrors.IsNotFound(getErr):
		d.placements.Unassume(placed)
		d.binds.WithLabelValues("error").Inc()
		return fmt.Errorf("binding %s to %s: %w", name, args.Node, err)
	default:
		d.placements.ExpireAssumed(placed, d.opts.InFlightTTL)
		d.binds.WithLabelValues("uncertain").Inc()
		d.log.WithFields(logrus.Fields{"pod": name, "node": args.Node, "error": err.Error(), "verifyError": fmt.Sprint(getErr)}).
			Warn("binding outcome unknown: the placement is kept until the informer confirms it or the in-flight TTL passes")
		return fmt.Errorf("binding %s to %s, outcome unknown: %w", name, args.Node, err)
	}
}

// definitive reports whether the API server answered err having decided
// not to bind: a 4xx refusal, as opposed to a timeout, throttling, a server
// error or no answer at all.
func definitive(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// commit is the commit-time check, the core's place phase with recheck:
// under the locks of the pod's groups, it judges the pod on args.Node
// against the cache plus every placement accepted so far, and on success
// records the placement at once.
//
// Recording before the API binding (not after it) releases the peers that
// wait for this pod (in-flight tracking) a whole API round trip sooner: the
// scheduler sends the next peer's filter call while this bind is under way,
// and it sits on the scheduler's serial cycle. Should the binding fail, Bind
// takes the placement back; a peer decided in the meantime was only held to
// a stricter view than necessary, never a laxer one.
func (d *Decider) commit(ctx context.Context, pol *policy.Policy, pod *model.Pod, keys []string, args *extenderv1.ExtenderBindingArgs, rec *bindRecord) (*model.Pod, error) {
	s := &judge.Subject{Policy: pol, Pod: pod, OwnLabels: pod.Labels, Keys: keys}
	placed, err := d.judge.Place(ctx, s, args.Node, true)
	var refused *judge.RefusedError
	switch {
	case errors.As(err, &refused):
		if rec != nil {
			rec.denied = decisionlog.DenialsOf(nil, refused.Conflicts, s.PeerName)
		}
		d.binds.WithLabelValues("refused").Inc()
		return nil, fmt.Errorf("%w: binding %s to %s would break a rule: %s", ErrRefused, pod.Key(), args.Node, refused.Reason())
	case errors.Is(err, judge.ErrPolicyChanged):
		return nil, errPolicyChanged
	case err != nil:
		d.binds.WithLabelValues("error").Inc()
		return nil, err
	}
	return placed, nil
}

// bindSubject is the pod to bind and its groups: from the in-flight record
// filter left, else (after a restart, or an unusual scheduler) from the API.
//
// Filter reserves only pending pods of the profile as the API server has
// them (isPendingPod), so a reservation of this UID for this namespace and
// name, made under the active policy, stands for such a pod; any other bind
// is checked against the API: the pod exists with this UID, is unbound, and
// is the profile's, and it is described under the active policy.
func (d *Decider) bindSubject(ctx context.Context, pol *policy.Policy, args *extenderv1.ExtenderBindingArgs) (*model.Pod, []string, error) {
	if pod, keys, by, ok := d.placements.Reserved(args.PodUID); ok && by == pol.Origin() &&
		pod.Namespace == args.PodNamespace && pod.Name == args.PodName {
		return pod, keys, nil
	}
	obj, err := d.opts.Client.CoreV1().Pods(args.PodNamespace).Get(ctx, args.PodName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("reading pod %s/%s to bind: %w", args.PodNamespace, args.PodName, err)
	}
	if obj.UID != args.PodUID {
		return nil, nil, fmt.Errorf("pod %s/%s has UID %s, not %s: it was replaced", args.PodNamespace, args.PodName, obj.UID, args.PodUID)
	}
	switch obj.Spec.NodeName {
	case "":
	case args.Node:
		return nil, nil, errBoundAlready // a retry of a bind that went through
	default:
		return nil, nil, fmt.Errorf("pod %s/%s is already assigned to node %s", args.PodNamespace, args.PodName, obj.Spec.NodeName)
	}
	if obj.Spec.SchedulerName != d.opts.SchedulerName {
		return nil, nil, fmt.Errorf("%w: pod %s/%s is for scheduler %q, not for the profile regosched serves (%q)",
			ErrRefused, args.PodNamespace, args.PodName, obj.Spec.SchedulerName, d.opts.SchedulerName)
	}
	if err := d.checkNode(ctx, obj, args.Node); err != nil {
		return nil, nil, err
	}
	pod := model.PodFromObject(obj)
	pod.Node = ""
	keys, described, err := pol.Describe(ctx, pod)
	if err != nil {
		return nil, nil, err
	}
	pod.Claims = described
	return pod, keys, nil
}
