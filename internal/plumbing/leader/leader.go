// Package leader elects one regosched replica to serve. The leader labels
// its own pod (Label), which the Service selects, so the scheduler's calls
// reach it alone: one process holds the in-flight state and the group locks
// that keep binds consistent. Every synced replica is Ready, so a rollout
// and a drain proceed. A replica that loses the lease stops, as
// kube-scheduler does, rather than serve on with state another replica may
// contradict.
package leader

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config names the Lease and this candidate.
type Config struct {
	Namespace string
	Name      string
	Identity  string
	// LeaseDuration, RenewDeadline and RetryPeriod follow kube-scheduler's
	// defaults (15s, 10s, 2s) when zero.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// PodNamespace and PodName name this replica's own pod, which carries
	// Label while it leads; no label is written when PodName is empty.
	PodNamespace string
	PodName      string
}

// Elector campaigns for the lease and tells whether this replica leads.
type Elector struct {
	elector *leaderelection.LeaderElector
	leading atomic.Bool
	lost    chan struct{}
	label   *podLabel // nil: no pod to label
	log     logrus.FieldLogger
}

// New prepares an elector; Run campaigns.
func New(client kubernetes.Interface, cfg Config, log logrus.FieldLogger) (*Elector, error) {
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = 10 * time.Second
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: cfg.Identity})
	if err != nil {
		return nil, fmt.Errorf("creating lease lock %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	e := &Elector{lost: make(chan struct{}), log: log}
	if cfg.PodName != "" {
		e.label = &podLabel{client: client, namespace: cfg.PodNamespace, name: cfg.PodName,
			lease: cfg.Namespace + "/" + cfg.Name, log: log}
	}
	e.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				e.leading.Store(true)
				log.WithField("identity", cfg.Identity).Info("leading: serving the scheduler")
				if e.label != nil {
					go e.label.mark(ctx)
				}
			},
			OnStoppedLeading: func() {
				if e.leading.Swap(false) {
					log.WithField("identity", cfg.Identity).Warn("lost the lease")
					close(e.lost)
				}
				if e.label != nil {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if err := e.label.unmark(ctx); err != nil {
						log.WithError(err).Warn("cannot remove the leader label from this pod")
					}
				}
			},
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.WithField("leader", id).Info("following")
				}
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("configuring leader election: %w", err)
	}
	return e, nil
}

// Run campaigns, then renews, until ctx ends or the lease is lost. It
// first removes a leader label this pod may carry from an earlier process
// (a restarted container), so that the Service never selects a replica
// that does not lead.
func (e *Elector) Run(ctx context.Context) {
	if e.label != nil {
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			if err := e.label.unmark(ctx); err != nil {
				e.log.WithError(err).Warn("cannot remove a stale leader label from this pod; not campaigning until it is gone")
				return false, nil
			}
			return true, nil
		})
		if ctx.Err() != nil {
			return
		}
	}
	e.elector.Run(ctx)
}

// StepDown removes the leader label before the lease is released (by
// cancelling Run's context): the Service stops selecting this replica first,
// so that two labelled pods are never selected at once. Run still holds the
// lease until its context ends.
func (e *Elector) StepDown(ctx context.Context) error {
	if e.label == nil || !e.leading.Load() {
		return nil
	}
	return e.label.unmark(ctx)
}

// Leading reports whether this replica holds the lease now.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Lost is closed when this replica loses the lease it held.
func (e *Elector) Lost() <-chan struct{} { return e.lost }
