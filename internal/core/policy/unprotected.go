package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
)

// UnprotectedRule is optional: why no hard rule protects a pod, as a set of
// {reason, message}; empty or undefined when the pod is protected.
const UnprotectedRule = "data.regosched.unprotected"

// Unprotected is one reason a pod is not (fully) protected by the hard
// rules: Reason is a short code for metrics, Message the sentence for people.
type Unprotected struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// UnreadableLabel is the label the Redis roles controller puts on a pod
// whose role it will not read, valued with the reason (HostNetwork), since
// a pod carries no other trace of it that explain and verify see.
const UnreadableLabel = "regosched.io/role-unreadable"

// HostNetwork: the pod shares its node's network, so its live role is
// never read (its IP and port may be another Redis on its node).
const HostNetwork = "host_network"

// hostNetworkMessage is HostNetwork's sentence.
const hostNetworkMessage = "the pod shares its node's network (hostNetwork, or its IP is its node's): regosched does not ask its Redis, so its live role stays unknown"

// Unprotected evaluates why pod is not protected; nil when it is, or when
// the policy does not say (but for an unreadable live role, said always).
func (p *Policy) Unprotected(ctx context.Context, pod *model.Pod) ([]Unprotected, error) {
	out, err := p.unprotectedByRules(ctx, pod)
	if err != nil {
		return nil, err
	}
	if why, _ := pod.Labels.Get(UnreadableLabel); why == HostNetwork {
		out = append(out, Unprotected{Reason: HostNetwork, Message: hostNetworkMessage})
		sort.Slice(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	}
	return out, nil
}

// unprotectedByRules is the policy's own answer (UnprotectedRule).
func (p *Policy) unprotectedByRules(ctx context.Context, pod *model.Pod) ([]Unprotected, error) {
	if p.unprotected == nil {
		return nil, nil
	}
	v, err := eval(ctx, *p.unprotected, podInput(pod))
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", UnprotectedRule, err)
	}
	set, ok := v.(ast.Set)
	if !ok {
		if v == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: want a set, got %v", UnprotectedRule, ast.ValueName(v))
	}
	var out []Unprotected
	var bad error
	set.Foreach(func(t *ast.Term) {
		var u Unprotected
		if err := ast.As(t.Value, &u); err != nil || u.Reason == "" {
			bad = fmt.Errorf("%s: %v is not {reason, message}", UnprotectedRule, t)
			return
		}
		out = append(out, u)
	})
	if bad != nil {
		return nil, bad
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	return out, nil
}

// maxRemembered bounds the pods an UnprotectedWatch remembers having
// reported; past it, it starts afresh, so a pod may be logged twice rather
// than memory grow with pod churn.
const maxRemembered = 100_000

// UnprotectedWatch counts and logs, once per pod, the pending pods of the
// profile that no hard rule protects, so that nobody believes a pod
// protected when the policy does not know what it is.
type UnprotectedWatch struct {
	log   logrus.FieldLogger
	count *prometheus.CounterVec

	mu   sync.Mutex
	seen map[types.UID]struct{}
}

// NewUnprotectedWatch exports its counter on reg.
func NewUnprotectedWatch(reg prometheus.Registerer, log logrus.FieldLogger) (*UnprotectedWatch, error) {
	w := &UnprotectedWatch{
		log: log,
		count: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_unprotected_pods_total",
			Help: "Pods of the regosched profile that no hard rule protects, by reason (no_workload: no workload matches the labels; role_unknown: the labels name no role; no_hard_rule: no hard rule concerns the role they name; host_network: its live role is not read, the pod sharing its node's network), counted once per pod.",
		}, []string{"reason"}),
		seen: map[types.UID]struct{}{},
	}
	if err := reg.Register(w.count); err != nil {
		return nil, fmt.Errorf("registering unprotected pod metrics: %w", err)
	}
	return w, nil
}

func (w *UnprotectedWatch) check(ctx context.Context, pol *Policy, pod *model.Pod) {
	w.mu.Lock()
	_, done := w.seen[pod.UID]
	w.mu.Unlock()
	if done {
		return
	}
	ctx, cancel := pol.offRequest(ctx) // the informer's context never ends
	why, err := pol.Unprotected(ctx, pod)
	cancel()
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			w.log.WithError(err).WithField("pod", pod.Key()).Warn("could not tell whether the pod is protected")
		}
		return
	}
	if len(why) == 0 {
		return
	}
	w.mu.Lock()
	if _, done := w.seen[pod.UID]; done {
		w.mu.Unlock()
		return
	}
	if len(w.seen) >= maxRemembered {
		w.seen = map[types.UID]struct{}{}
	}
	w.seen[pod.UID] = struct{}{}
	w.mu.Unlock()
	for _, u := range why {
		w.count.WithLabelValues(u.Reason).Inc()
		w.log.WithFields(logrus.Fields{"pod": pod.Key(), "reason": u.Reason}).Warn("no hard rule protects the pod: " + u.Message)
	}
}
