package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	kpreemption "k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Default preemption, wrapped: the plugin's PostFilter runs kube-scheduler's
// own (defaultpreemption, built inside the plugin; the profile disables the
// stock one, deploy/plugin), whose IsEligiblePod keeps the default's check
// and refuses every victim the policy protects (preemption.protected, e.g.
// a Redis master), as the extender's preempt verb drops a node whose
// victims include one. The dry run then looks for victims among the others
// only; when none will do, a second dry run with the protection lifted
// tells whether evicting protected pods would have made room, and the
// pod's unschedulable message names them.

// preemption is default preemption that never evicts a protected pod.
type preemption struct {
	dp       *defaultpreemption.DefaultPreemption
	handle   fwk.Handle
	policies Policies
	log      logrus.FieldLogger
	// cycles are the preemptions under way by preemptor UID, for
	// IsEligiblePod, which is given no cycle state.
	cycles sync.Map
}

// newPreemption builds default preemption on h with the scheduler's feature
// gates fts and its default args (DefaultPreemption's pluginConfig belongs
// to the stock plugin the profile disables).
func newPreemption(ctx context.Context, h fwk.Handle, fts feature.Features, policies Policies, log logrus.FieldLogger) (*preemption, error) {
	args, err := defaultPreemptionArgs()
	if err != nil {
		return nil, err
	}
	dp, err := defaultpreemption.New(ctx, args, h, fts)
	if err != nil {
		return nil, fmt.Errorf("default preemption: %w", err)
	}
	p := &preemption{dp: dp, handle: h, policies: policies, log: log}
	dp.IsEligiblePod = p.eligible(dp.IsEligiblePod)
	return p, nil
}

// eligible is IsEligiblePod: the default's own check, then the policy's.
func (p *preemption) eligible(dflt defaultpreemption.IsEligiblePodFunc) defaultpreemption.IsEligiblePodFunc {
	return func(ni fwk.NodeInfo, victim kpreemption.Victim, preemptor *v1.Pod) bool {
		return dflt(ni, victim, preemptor) && p.protection(preemptor).allows(ni, victim)
	}
}

// defaultPreemptionArgs are DefaultPreemptionArgs as kube-scheduler
// defaults them, so that the numbers stay the release's own.
func defaultPreemptionArgs() (*config.DefaultPreemptionArgs, error) {
	v := &configv1.DefaultPreemptionArgs{}
	scheme.Scheme.Default(v)
	args := &config.DefaultPreemptionArgs{}
	if err := scheme.Scheme.Convert(v, args, nil); err != nil {
		return nil, fmt.Errorf("default preemption args: %w", err)
	}
	return args, nil
}

// protection is what one preemption learns of the policy's protection.
type protection struct {
	ctx context.Context
	pol *policy.Policy
	log logrus.FieldLogger
	// lifted is set for the dry run that asks whether evicting protected
	// pods would have made room.
	lifted   atomic.Bool
	mu       sync.Mutex
	verdicts map[types.UID]bool
	// refused are the protected pods turned down as victims, by node.
	refused map[string][]*v1.Pod
}

func newProtection(ctx context.Context, pol *policy.Policy, log logrus.FieldLogger) *protection {
	return &protection{ctx: ctx, pol: pol, log: log, verdicts: map[types.UID]bool{}, refused: map[string][]*v1.Pod{}}
}

// protection returns the preemption under way for preemptor, or, for a
// call outside the plugin's PostFilter, a fresh one under the active policy.
func (p *preemption) protection(preemptor *v1.Pod) *protection {
	if c, ok := p.cycles.Load(preemptor.UID); ok {
		return c.(*protection)
	}
	return newProtection(context.Background(), p.policies.Load(), p.log)
}

// allows reports whether victim may be evicted: none of its pods protected.
// Safe from many goroutines (the dry run checks nodes in parallel).
func (c *protection) allows(ni fwk.NodeInfo, victim kpreemption.Victim) bool {
	if c.lifted.Load() {
		return true
	}
	for _, pi := range victim.Pods() {
		if pod := pi.GetPod(); c.protects(pod) {
			c.refuse(ni, pod)
			return false
		}
	}
	return true
}

// protects asks the policy, once per pod and preemption, whether pod is
// protected; an error counts as protected, since a guess must never evict
// a master.
func (c *protection) protects(pod *v1.Pod) bool {
	c.mu.Lock()
	v, ok := c.verdicts[pod.UID]
	c.mu.Unlock()
	if ok {
		return v
	}
	v, err := c.ask(pod)
	if err != nil {
		v = true
		c.log.WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).Warn("preemption: not evicting a pod the policy cannot say is unprotected")
	}
	c.mu.Lock()
	c.verdicts[pod.UID] = v
	c.mu.Unlock()
	return v
}

func (c *protection) ask(pod *v1.Pod) (bool, error) {
	err := policy.ErrNoPolicy
	v := false
	if c.pol != nil {
		// A policy that runs away must not hold the scheduler's one cycle.
		ctx, cancel := context.WithTimeout(c.ctx, policy.DescribeTimeout)
		v, err = c.pol.Protected(ctx, model.PodFromObject(pod))
		cancel()
	}
	if err != nil {
		return false, fmt.Errorf("asking whether %s/%s is protected: %w", pod.Namespace, pod.Name, err)
	}
	return v, nil
}

func (c *protection) refuse(ni fwk.NodeInfo, pod *v1.Pod) {
	node := pod.Spec.NodeName
	if n := ni.Node(); n != nil {
		node = n.Name
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.ContainsFunc(c.refused[node], func(q *v1.Pod) bool { return q.UID == pod.UID }) {
		c.refused[node] = append(c.refused[node], pod)
	}
}

// refusedNodes are the nodes where a protected pod was turned down, sorted.
func (c *protection) refusedNodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes := make([]string, 0, len(c.refused))
	for n := range c.refused {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return nodes
}

// postFilter runs default preemption for pod under pol (the cycle's
// policy) and, when it finds no candidate only because of the protection,
// says so in the status.
func (p *preemption) postFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader, pol *policy.Policy) (*fwk.PostFilterResult, *fwk.Status) {
	c := newProtection(ctx, pol, p.log)
	p.cycles.Store(pod.UID, c)
	defer p.cycles.Delete(pod.UID)
	res, st := p.dp.PostFilter(ctx, cs, pod, m)
	// Only "no candidate" clears the nomination (NominatingMode Override
	// with no node); other failures are not the victims' doing.
	if !st.IsRejected() || res == nil || res.Mode() != fwk.ModeOverride || res.NominatedNodeName != "" {
		return res, st
	}
	if why := p.explain(ctx, cs, pod, c); why != "" {
		st = fwk.NewStatus(st.Code(), append(st.Reasons(), why)...)
	}
	return res, st
}

// explain dry-runs preemption again, with the protection lifted, on the
// nodes where it turned protected pods down, and returns the reason to
// give when that finds room: the protected pods it would have evicted.
func (p *preemption) explain(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, c *protection) string {
	names := c.refusedNodes()
	if len(names) == 0 {
		return ""
	}
	lister := p.handle.MutableSnapshotSharedLister().NodeInfos()
	var nodes []fwk.NodeInfo
	for _, name := range names {
		if ni, err := lister.Get(name); err == nil {
			nodes = append(nodes, ni)
		}
	}
	if len(nodes) == 0 {
		return ""
	}
	c.lifted.Store(true)
	defer c.lifted.Store(false)
	// No PodDisruptionBudgets: they only order candidates, and one will do.
	cands, _, err := p.dp.Evaluator.DryRunPreemption(ctx, cs, pod, nodes, nil, 0, 1)
	if err != nil && len(cands) == 0 {
		p.log.WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).Debug("preemption: no explanation of the protected victims")
		return ""
	}
	if len(cands) == 0 {
		return ""
	}
	var protected []string
	for _, v := range cands[0].Victims().Pods {
		if c.protects(v) {
			protected = append(protected, v.Namespace+"/"+v.Name)
		}
	}
	if len(protected) == 0 {
		return ""
	}
	slices.Sort(protected)
	return fmt.Sprintf("regosched protects the pods preemption would have to evict (%s on node %s) and never evicts a protected pod",
		strings.Join(protected, ", "), cands[0].Name())
}

// PreEnqueue holds a pod back while its own preemption's victims are being
// evicted (async preemption), as the stock DefaultPreemption does.
func (pl *Regosched) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	if pl.preemption == nil {
		return nil
	}
	return pl.preemption.dp.PreEnqueue(ctx, pod)
}
