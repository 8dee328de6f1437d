package repair

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/model"
)

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
