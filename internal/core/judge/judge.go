// Package judge is regosched's core: it decides whole phases for one pod,
// once, for every front end. The extender's verbs (internal/frontend/
// decision) and regosched-scheduler's framework plugin translate to and
// from it, as scheduler-plugins' coscheduling plugin sits over its
// framework-free core.Manager; the audit, the repair, explain, verify and
// the shadow rollout call the same phases.
//
// One call per phase, one file each, over the neutral types of
// internal/core/model:
//   - Filter (filter.go): describe the pending pod, find its peers,
//     judge, re-read the peers in doubt, weigh preemption, decide the
//     candidates; Filtered.Decide answers node by node, under a
//     preemption dry run's Edits (edits.go);
//   - Score (scores.go): the soft rules' penalties as scores;
//   - Victims (victims.go): which preemption candidates free the pod
//     without evicting a protected pod;
//   - Place (place.go): the pod recorded on its node before its binding
//     is seen, rechecked under its groups' locks where asked;
//   - Stand (stand.go): a bound pod judged where it stands.
//
// Beside them: the subject (subject.go), the verdict and protection
// (verdict.go), peers read again (refresh.go) or met outside the
// placements (peer.go), a second policy judged beside (beside.go), and
// the denial log (denials.go).
package judge

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// ErrNoPolicy is returned while no policy is active, by every front end.
var ErrNoPolicy = policy.ErrNoPolicy

// PeerView is what judging a pod where it stands reads of the cluster
// (implemented by placement.Cache).
type PeerView interface {
	// Peers returns the bound or assumed pods that share a key with self.
	Peers(keys []string, self types.UID) []*model.Pod
	policy.Cluster
}

// Placements is the view of the cluster the judge reads (implemented by
// placement.Cache).
type Placements interface {
	PeerView
	// PodByUID returns a bound or assumed pod that belongs to a group.
	PodByUID(uid types.UID) (*model.Pod, bool)
	// Assume records a pod as bound before the informer reports it, unless
	// current (asked under the lock a re-index swaps under) says no.
	Assume(pod *model.Pod, keys []string, current func() bool) bool
	// NodeNames lists every known node: whether rules per zone must yield
	// is asked of them all (YieldZones), on the rare path where every
	// candidate is refused.
	NodeNames() []string
}

// Policies gives the active policy; nil while none is.
type Policies interface {
	Load() *policy.Policy
}

// Described gives what was worked out for a pending pod ahead of its
// scheduling (implemented by placement.Pending).
type Described interface {
	// Described returns pod's groups and claims when they were described
	// under by from what pod holds now.
	Described(pod *model.Pod, by *model.Origin) (keys []string, c *model.Claims, ok bool)
}

// Config is what a Judge is made of.
type Config struct {
	Placements Placements
	// Policies is the active policy, which Place checks has not changed.
	Policies Policies
	// Client re-reads peers the cache may hold stale; nil never re-reads.
	Client kubernetes.Interface
	// Ahead, if set, holds pending pods described before they are judged.
	Ahead Described
	// Recall, if set, gives the labels a pending pod is judged with when
	// they are not its own (ok): the last known Redis role of a pod
	// recreated under the same name, before its labels have it again.
	Recall func(ctx context.Context, pod *v1.Pod) (labels model.Labels, ok bool)
	// RefreshRate (per second) and RefreshBurst bound the re-reads of
	// stale peers; defaults DefaultRefreshRate and DefaultRefreshBurst.
	RefreshRate  float64
	RefreshBurst int
	// Recorder, if set, takes the Event that tells a pod's owner the rules
	// per zone yielded for it (Yielded); nil records none.
	Recorder events.EventRecorder
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
	locks        *groupLocks
	totals       Totals
	refreshReads flowcontrol.RateLimiter
	denials      *prometheus.CounterVec
	yields       *prometheus.CounterVec
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
		locks:        newGroupLocks(),
		refreshReads: flowcontrol.NewTokenBucketRateLimiter(float32(cfg.RefreshRate), cfg.RefreshBurst),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_filter_denials_total",
			Help: "Candidate nodes a hard rule turned the pending pod away from, by rule and by whether preemption could resolve the conflict.",
		}, []string{"rule", "resolvable"}),
		yields: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_zone_rules_yielded_total",
			Help: "Pending pods for which the hard rules per zone yielded, by verb: no node of the cluster took the pod, some refused by those rules alone, so it was placed breaking them.",
		}, []string{"verb"}),
		described: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_pending_descriptions_total",
			Help: "Pending pods' policy descriptions used to judge them, by when they were made: ahead (when the pod was created or changed) or in_request.",
		}, []string{"when"}),
	}
	j.describedAhead, j.describedNow = j.described.WithLabelValues("ahead"), j.described.WithLabelValues("in_request")
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{j.denials, j.yields, j.described} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering the judge's metrics: %w", err)
			}
		}
	}
	return j, nil
}
