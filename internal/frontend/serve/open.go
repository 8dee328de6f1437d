package serve

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/frontend/assembly"
)

// open opens the policy, the placement cache of bound pods, the
// --shadow-policy and the --decision-log as regosched-scheduler's plugin
// does (assembly.Open), with serve's own cache, which tells the audit of
// relabelled pods; and the clients of the verbs and of the background
// writes (newClients).
func (s *server) open(ctx context.Context, reg prometheus.Registerer) (_ *assembly.Parts, client, background kubernetes.Interface, err error) {
	opts, log := s.opts, s.log
	cfg := assembly.Config{
		Policy: opts.Policy,
		// The clients are made once the policy has loaded: a broken policy
		// is the error to report first, not a missing kubeconfig.
		NewCache: func(keys placement.KeyFunc) (*placement.Cache, error) {
			var err error
			if client, background, err = newClients(opts); err != nil {
				return nil, err
			}
			return placement.New(client, keys, log.WithField("component", "placement"), placement.WithOnRelabel(s.relabelled))
		},
		Reindexed: func(ctx context.Context) {
			if s.pending != nil {
				s.pending.SetDescribeFunc(ctx, s.describePending)
			}
		},
		ShadowPolicy: opts.ShadowPolicy,
		Names:        assembly.Names{ShadowPolicy: "--shadow-policy", DecisionLog: "--decision-log"},
		Registerer:   reg,
		Log:          log,
	}
	if opts.DecisionLog.On() {
		if cfg.DecisionLog, err = opts.DecisionLog.Config(decisionLogFlags); err != nil {
			return nil, nil, nil, err
		}
		cfg.DecisionLog.InstanceID, cfg.DecisionLog.Version = opts.Leader.Identity, opts.Version
		if cfg.DecisionLog.InstanceID == "" {
			cfg.DecisionLog.InstanceID = "regosched"
		}
	}
	p, err := assembly.Open(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	log.WithFields(logrus.Fields{"source": p.Source.Description(), "revision": p.Source.First().Revision()}).Info("policy loaded")
	if p.Shadow != nil {
		log.WithFields(logrus.Fields{"source": p.Shadow.Source.Description(), "revision": p.Shadow.Source.First().Revision()}).
			Info("shadow policy loaded; judged beside the active one, never enforced")
	}
	if p.DecisionLog != nil {
		log.WithField("component", "decision-log").WithFields(logrus.Fields{"target": opts.DecisionLog.Target, "sample": opts.DecisionLog.SampleRate}).
			Info("decision log on")
	}
	return p, client, background, nil
}

// relabelled asks the audit for a pass when a bound pod is relabelled (a
// role moved at failover can break a rule where it stands).
func (s *server) relabelled() {
	select {
	case s.auditTrigger <- struct{}{}:
	default:
	}
}

// closeDecisionLog sends what the decision log holds; a collector that
// does not take it costs those events (counted), not a failed shutdown.
func (s *server) closeDecisionLog() {
	if err := s.parts.Close(); err != nil {
		s.log.WithError(err).Warn("decision log: closing")
	}
}
