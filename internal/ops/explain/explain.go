// Package explain shows, for one pod, what regosched would decide on every
// node of a cluster and why: the verdict of filter, the score of
// prioritize and the reasons, plus the policy revision, the pod's peer
// groups and its peers, which is what a policy author needs to debug a
// rule (`regosched explain`).
//
// It runs the core's filter and score phases over a real placement cache:
// the same informers, policy and judge as `regosched serve`, with no
// in-flight waiting and nothing reserved, since nothing is being
// scheduled.
package explain

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
)

// DefaultSyncTimeout bounds the wait for the API server and the initial
// lists of pods and nodes.
const DefaultSyncTimeout = 30 * time.Second

// Outcome is filter's answer for one node (a report's "verdict").
type Outcome string

// Verdicts, as the extender protocol has them.
const (
	// OK: the node passes filter.
	OK Outcome = "ok"
	// Failed: a hard rule removes the node, but every conflicting peer on it
	// has a lower priority, so preemption may help (FailedNodes).
	Failed Outcome = "failed"
	// Unresolvable: a hard rule removes the node and preemption cannot help
	// (FailedAndUnresolvableNodes).
	Unresolvable Outcome = "unresolvable"
)

// Report is what regosched decides for one pod.
type Report struct {
	// Pod is the pod's namespace/name.
	Pod    string     `json:"pod"`
	Policy PolicyInfo `json:"policy"`
	// PeerKeys are the groups the policy's peer_keys rule gives the pod;
	// empty means no rule applies to it.
	PeerKeys []string `json:"peerKeys"`
	// Unprotected says why no hard rule (or only the careful one for an
	// unknown role) protects the pod; empty when the pod is protected.
	Unprotected []policy.Unprotected `json:"unprotected,omitempty"`
	// Peers are the bound pods that share a group with the pod.
	Peers []Peer `json:"peers"`
	// BoundTo is the node the pod itself is bound to already, if it is in
	// the cluster; it is not its own peer.
	BoundTo string `json:"boundTo,omitempty"`
	// Scored is false when prioritize expressed no preference among the
	// nodes filter kept (no soft rule applies to them): each scores 0.
	Scored bool `json:"scored"`
	// Nodes are every node of the cluster: rejected ones first (by name),
	// then the others by score, highest first, then by name.
	Nodes []NodeResult `json:"nodes"`
}

// PolicyInfo names the policy that decided.
type PolicyInfo struct {
	Source   string `json:"source"`
	Revision string `json:"revision"`
}

// Peer is a pod the policy compares the pod with.
type Peer struct {
	Pod      string            `json:"pod"`
	Node     string            `json:"node"`
	Priority int32             `json:"priority"`
	Labels   map[string]string `json:"labels"`
}

// NodeResult is the decision for one node.
type NodeResult struct {
	Node    string  `json:"node"`
	Verdict Outcome `json:"verdict"`
	// Score is prioritize's 0..10 among the nodes that pass filter, as the
	// scheduler would get it; nil for a node filter removes.
	Score *int64 `json:"score,omitempty"`
	// Reason is filter's reason for removing the node, as the scheduler
	// shows it in the pod's FailedScheduling event.
	Reason string `json:"reason,omitempty"`
	// Denials are the hard rules that remove the node, each with the peer
	// it keeps the pod from, sorted by rule and peer.
	Denials []Denial `json:"denials,omitempty"`
}

// Denial is one hard rule that removes a node, for one peer.
type Denial struct {
	Rule string `json:"rule"`
	// Peer is the peer's namespace/name.
	Peer   string `json:"peer"`
	Reason string `json:"reason"`
}

// Options configure Explain.
type Options struct {
	Client kubernetes.Interface
	Policy *policy.Policy
	// PolicySource names where Policy came from, for the report.
	PolicySource string
	// SyncTimeout bounds the wait for the API server; 0 means
	// DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Log receives the placement cache's and the decider's logs; required.
	Log logrus.FieldLogger
}

// Explain decides for pod on every node the cluster has, with the real
// placement cache and decider. A pod without a namespace is in "default".
// The pod is not changed.
func Explain(ctx context.Context, pod *corev1.Pod, opts Options) (*Report, error) {
	e, err := NewExplainer(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return e.Explain(ctx, pod)
}

// Explainer explains pods against one cluster, listed once into its
// placement cache: `regosched verify` explains a suite's pods with one.
// Its decisions reserve nothing in the cache (the decider knows no
// scheduler profile), so one pod's explanation never changes the next's.
type Explainer struct {
	opts  Options
	cache *placement.Cache
	stop  func()
}

// NewExplainer lists the cluster of opts.Client into a placement cache,
// within opts.SyncTimeout; Close stops it.
func NewExplainer(ctx context.Context, opts Options) (*Explainer, error) {
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	pol := opts.Policy
	ctx, cancel := context.WithCancel(ctx)
	cache, err := placement.New(opts.Client, policy.Describer(func() *policy.Policy { return pol }), opts.Log.WithField("component", "placement"))
	if err != nil {
		cancel()
		return nil, err
	}
	cache.Start(ctx)
	// The informers stop only once ctx is cancelled: cancel, then wait.
	e := &Explainer{opts: opts, cache: cache, stop: func() { cancel(); cache.Shutdown() }}
	if err := cache.SyncWithin(ctx, opts.Client, opts.SyncTimeout); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Placements is the cluster as the explainer listed it, for an audit of
// the same cluster that need not list it again.
func (e *Explainer) Placements() *placement.Cache { return e.cache }

// Close stops the explainer's informers and waits for them.
func (e *Explainer) Close() { e.stop() }

// Explain decides for pod on every node of the explainer's cluster. A pod
// without a namespace is in "default". The pod is not changed.
func (e *Explainer) Explain(ctx context.Context, pod *corev1.Pod) (*Report, error) {
	opts, cache, pol := e.opts, e.cache, e.opts.Policy
	pod = pod.DeepCopy()
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}

	self := model.PodFromObject(pod)
	self.Node = "" // as the decider sees it: pending
	keys, err := pol.PeerKeys(ctx, self)
	if err != nil {
		return nil, fmt.Errorf("peer keys of %s: %w", self.Key(), err)
	}
	why, err := judge.Unprotected(ctx, pol, cache, self)
	if err != nil {
		return nil, fmt.Errorf("protection of %s: %w", self.Key(), err)
	}
	report := &Report{
		Pod:         self.Key(),
		Policy:      PolicyInfo{Source: opts.PolicySource, Revision: pol.Revision()},
		PeerKeys:    keys,
		Unprotected: why,
	}
	report.BoundTo = adoptBoundSelf(cache, keys, pod)
	for _, p := range cache.Peers(keys, pod.UID) {
		report.Peers = append(report.Peers, Peer{Pod: p.Key(), Node: p.Node, Priority: p.Priority, Labels: p.Labels.Map()})
	}

	// The core's filter phase, once: no client, so no re-reading of peers
	// behind a total refusal (the cache has just been listed, it is not
	// behind), and nothing reserved.
	j, err := judge.New(judge.Config{Placements: cache, Policies: fixedPolicy{pol}, Log: opts.Log.WithField("component", "judge")})
	if err != nil {
		return nil, err
	}
	f, err := j.Filter(ctx, judge.FilterRequest{Policy: pol, Pod: pod, Candidates: cache.NodeNames()})
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	refused := make(map[int]bool, len(f.Refused))
	for _, r := range f.Refused {
		refused[r.Index] = true
		verdict := Unresolvable
		if r.Resolvable {
			verdict = Failed
		}
		report.Nodes = append(report.Nodes, NodeResult{Node: r.Node, Verdict: verdict, Reason: r.Reason(), Denials: denials(f.Subject, r.Conflicts)})
	}
	var kept []string
	for i, name := range f.Candidates {
		if !refused[i] {
			kept = append(kept, name)
		}
	}
	// Only the nodes filter kept are scored, as the scheduler does: the
	// scores are relative to the worst candidate, so a rejected node must
	// not count.
	scores, scored := judge.ScoreNodes(f.Penalties(), kept, func(_ int, name string) map[string]string {
		l, _ := cache.NodeLabels(name)
		return l
	}, nil)
	for i, name := range kept {
		score := int64(0) // no preference: every node scores 0, as a prioritize answer without the node
		if scored {
			score = scores.Score(i, extenderv1.MaxExtenderPriority)
		}
		// As prioritize answers: a preference only where some node scores.
		report.Scored = report.Scored || score > 0
		report.Nodes = append(report.Nodes, NodeResult{Node: name, Verdict: OK, Score: &score})
	}
	slices.SortFunc(report.Nodes, compareNodes)
	return report, nil
}

// denials are the hard rules of cs, each with the peer it keeps the pod
// from, sorted by rule and peer.
func denials(s *judge.Subject, cs []model.Conflict) []Denial {
	out := make([]Denial, 0, len(cs))
	for _, c := range cs {
		out = append(out, Denial{Rule: c.Rule, Peer: s.PeerName(c.Peer), Reason: c.Reason})
	}
	slices.SortFunc(out, func(a, b Denial) int {
		return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(a.Peer, b.Peer), strings.Compare(a.Reason, b.Reason))
	})
	return slices.Compact(out)
}

// compareNodes orders rejected nodes first (the reasons are what an author
// looks for), by name, then the others by score, highest first, then name.
func compareNodes(a, b NodeResult) int {
	if (a.Verdict == OK) != (b.Verdict == OK) {
		if a.Verdict == OK {
			return 1
		}
		return -1
	}
	if a.Score != nil && b.Score != nil && *a.Score != *b.Score {
		return cmp.Compare(*b.Score, *a.Score)
	}
	return strings.Compare(a.Node, b.Node)
}

// adoptBoundSelf returns the node of a bound pod that is the pod itself:
// the same UID, or, for a pod file without one (a manifest not yet
// applied, or edited), the same namespace and name. In the second case pod
// takes that UID, so that it is not counted as its own peer.
func adoptBoundSelf(cache *placement.Cache, keys []string, pod *corev1.Pod) string {
	for _, p := range cache.Peers(keys, "") {
		if (pod.UID != "" && p.UID == pod.UID) ||
			(pod.UID == "" && p.Namespace == pod.Namespace && p.Name == pod.Name) {
			pod.UID = p.UID
			return p.Node
		}
	}
	return ""
}

// fixedPolicy is the one policy of an explain run (judge.Policies).
type fixedPolicy struct{ p *policy.Policy }

func (f fixedPolicy) Load() *policy.Policy { return f.p }
