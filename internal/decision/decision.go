// Package decision turns the active policy's verdicts about a pending pod and
// its peers into kube-scheduler extender results.
//
// Rego sees only the pending pod and its peers and answers per peer node;
// the work proportional to the number of candidate nodes (which may be
// thousands) is plain Go over node names. Files are split by extension point,
// as in kube-scheduler's plugins: filter.go, prioritize.go.
package decision

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
)

// ErrNoPolicy is returned while no policy is active.
var ErrNoPolicy = errors.New("no active policy")

// Placements is the view of the cluster that decisions need.
type Placements interface {
	// Peers returns the bound pods that share a key with the pod self.
	Peers(keys []string, self types.UID) []*placement.Pod
	// NodeLabels returns a node's labels and whether the node is known.
	NodeLabels(name string) (map[string]string, bool)
}

// Policies gives the policy to decide with; nil while none is active.
type Policies interface {
	Load() *policy.Policy
}

// Decider answers filter and prioritize requests.
type Decider struct {
	placements Placements
	policies   Policies
	log        logrus.FieldLogger
	denials    *prometheus.CounterVec
}

// New returns a Decider whose metrics are registered on reg.
func New(placements Placements, policies Policies, log logrus.FieldLogger, reg prometheus.Registerer) (*Decider, error) {
	d := &Decider{
		placements: placements,
		policies:   policies,
		log:        log,
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_filter_denials_total",
			Help: "Candidate nodes removed by filter, by rule and by whether preemption could resolve the conflict.",
		}, []string{"rule", "resolvable"}),
	}
	if err := reg.Register(d.denials); err != nil {
		return nil, fmt.Errorf("registering decision metrics: %w", err)
	}
	return d, nil
}

// subject is a pending pod with the policy to judge it by and its peers.
type subject struct {
	policy *policy.Policy
	pod    *placement.Pod
	peers  []*placement.Pod
}

// lookup finds the peers of the pending pod. With no peers, no rule can
// apply and callers skip all further policy work.
func (d *Decider) lookup(ctx context.Context, pod *v1.Pod) (*subject, error) {
	pol := d.policies.Load()
	if pol == nil {
		return nil, ErrNoPolicy
	}
	s := &subject{policy: pol, pod: placement.PodFromObject(pod)}
	// The pending pod is not bound; its node (if the request carries a stale
	// one) must not make it look placed.
	s.pod.Node = ""
	keys, err := pol.PeerKeys(ctx, s.pod)
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		s.peers = d.placements.Peers(keys, s.pod.UID)
	}
	return s, nil
}

// input is the policy input for s: the pod, its peers and their nodes' labels.
func (d *Decider) input(s *subject) *policy.Input {
	nodes := make(map[string]map[string]string, len(s.peers))
	for _, p := range s.peers {
		if _, done := nodes[p.Node]; done {
			continue
		}
		if labels, ok := d.placements.NodeLabels(p.Node); ok {
			nodes[p.Node] = labels
		}
	}
	return &policy.Input{Pod: s.pod, Peers: s.peers, Nodes: nodes}
}

// candidateNames lists the candidate nodes of args in order, from NodeNames
// (node-cache-capable scheduler) or from full Node objects.
func candidateNames(args *extenderv1.ExtenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	if args.Nodes == nil {
		return nil
	}
	names := make([]string, len(args.Nodes.Items))
	for i := range args.Nodes.Items {
		names[i] = args.Nodes.Items[i].Name
	}
	return names
}
