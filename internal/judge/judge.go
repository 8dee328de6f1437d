// Package judge decides a pending pod's fate among its peers, once, for
// both of regosched's front ends: the extender's internal/decision and
// regosched-scheduler's framework plugin are thin adapters over it, as
// scheduler-plugins' coscheduling plugin sits over its framework-free
// core. The audit and the repair judge bound pods where they stand with it
// too, and the shadow rollout judges a second policy with it.
//
// The judge works on neutral types (Pod, Conflict, Penalty, the policy
// that decided) and knows neither the extender's wire types nor the
// scheduling framework's. What it owns:
//   - describing the pending pod and finding its peers (subject.go);
//   - the conflicts by node, and whether preemption can resolve a node
//     (verdict.go);
//   - re-reading peers the cache may hold stale (refresh.go);
//   - the soft rules' penalties by domain (penalties.go) and the
//     candidates' scores (scores.go);
//   - judging a pod under another policy beside its peers (beside.go);
//   - the pod as its peers will read it once it is on a node (record.go);
//   - the denial log and count (denials.go), and decisions as decision log
//     events (decisionlog.go).
package judge

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/regosched/regosched/internal/claims"
	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
)

// The neutral types the judge answers in. They are the policy's own: a
// judge that copied them would copy every pod of every request.
type (
	// Pod is a pod as the policy reads it.
	Pod = placement.Pod
	// Conflict is a hard rule that keeps the pending pod off a peer's node.
	Conflict = policy.Conflict
	// Penalty is a soft rule that makes a domain less preferred.
	Penalty = policy.Penalty
	// Origin is the identity of the policy that decided: what was worked
	// out under one policy is never used under another.
	Origin = claims.Origin
)

// ErrNoPolicy is returned while no policy is active, by every front end.
var ErrNoPolicy = policy.ErrNoPolicy

// PeerView is what judging a pod where it stands reads of the cluster
// (implemented by placement.Cache).
type PeerView interface {
	// Peers returns the bound or assumed pods that share a key with self.
	Peers(keys []string, self types.UID) []*Pod
	// NodeLabels returns a node's labels and whether the node is known.
	NodeLabels(name string) (map[string]string, bool)
}

// Placements is the view of the cluster the judge reads (implemented by
// placement.Cache).
type Placements interface {
	PeerView
	// PodByUID returns a bound or assumed pod that belongs to a group.
	PodByUID(uid types.UID) (*Pod, bool)
}

// Described gives what was worked out for a pending pod ahead of its
// scheduling (implemented by placement.Pending).
type Described interface {
	// Described returns pod's groups and claims when they were described
	// under by from what pod holds now.
	Described(pod *Pod, by *Origin) (keys []string, c *claims.Claims, ok bool)
}

// Config is what a Judge is made of.
type Config struct {
	Placements Placements
	// Client re-reads peers the cache may hold stale; nil never re-reads.
	Client kubernetes.Interface
	// Ahead, if set, holds pending pods described before they are judged.
	Ahead Described
	// Recall, if set, gives the labels a pending pod is judged with when
	// they are not its own (ok): the last known Redis role of a pod
	// recreated under the same name, before its labels have it again.
	Recall func(pod *v1.Pod) (labels placement.Labels, ok bool)
	// RefreshRate (per second) and RefreshBurst bound the re-reads of
	// stale peers; defaults DefaultRefreshRate and DefaultRefreshBurst.
	RefreshRate  float64
	RefreshBurst int
	// Registerer takes the judge's metrics; nil registers none.
	Registerer prometheus.Registerer
	Log        logrus.FieldLogger
}

// Defaults of Config: at most MaxRefresh reads per judged pod, for some
// twenty re-reads in a burst and five a second after it.
const (
	DefaultRefreshRate  = 20
	DefaultRefreshBurst = 80
)

// Judge decides pending pods among their peers. It is safe for concurrent
// use: the extender judges many pods at once.
type Judge struct {
	cfg          Config
	refreshReads flowcontrol.RateLimiter
	denials      *prometheus.CounterVec
	described    *prometheus.CounterVec
	// describedAhead and describedNow are described's two children.
	describedAhead, describedNow prometheus.Counter
}

// New returns a Judge.
func New(cfg Config) (*Judge, error) {
	if cfg.Placements == nil {
		return nil, errors.New("judge: no placements")
	}
	if cfg.Log == nil {
		return nil, errors.New("judge: no logger")
	}
	if cfg.RefreshRate <= 0 {
		cfg.RefreshRate = DefaultRefreshRate
	}
	if cfg.RefreshBurst <= 0 {
		cfg.RefreshBurst = DefaultRefreshBurst
	}
	j := &Judge{
		cfg:          cfg,
		refreshReads: flowcontrol.NewTokenBucketRateLimiter(float32(cfg.RefreshRate), cfg.RefreshBurst),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_filter_denials_total",
			Help: "Candidate nodes a hard rule turned the pending pod away from, by rule and by whether preemption could resolve the conflict.",
		}, []string{"rule", "resolvable"}),
		described: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_pending_descriptions_total",
			Help: "Pending pods' policy descriptions used to judge them, by when they were made: ahead (when the pod was created or changed) or in_request.",
		}, []string{"when"}),
	}
	j.describedAhead, j.describedNow = j.described.WithLabelValues("ahead"), j.described.WithLabelValues("in_request")
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{j.denials, j.described} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering the judge's metrics: %w", err)
			}
		}
	}
	return j, nil
}
