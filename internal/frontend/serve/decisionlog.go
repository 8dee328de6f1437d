package serve

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// DefaultDecisionLogTimeout bounds one upload of the decision log.
const DefaultDecisionLogTimeout = decisionlog.DefaultTimeout

// newDecisionLog starts the --decision-log logger, its dropped counter
// registered on reg.
func newDecisionLog(opts Options, reg prometheus.Registerer, log logrus.FieldLogger) (*decisionlog.Logger, error) {
	o := opts.DecisionLog
	cfg, err := o.Config(decisionLogFlags)
	if err != nil {
		return nil, err
	}
	cfg.InstanceID, cfg.Version, cfg.Registerer, cfg.Log = opts.Leader.Identity, opts.Version, reg, log
	if cfg.InstanceID == "" {
		cfg.InstanceID = "regosched"
	}
	l, err := decisionlog.New(cfg)
	if err != nil {
		_ = cfg.Sink.Close()
		return nil, fmt.Errorf("--decision-log: %w", err)
	}
	log.WithFields(logrus.Fields{"target": o.Target, "sample": o.SampleRate}).Info("decision log on")
	return l, nil
}

// closeDecisionLog sends what the decision log holds, within
// decisionlog.CloseTimeout; a collector that does not take it costs those
// events (counted), not a failed shutdown.
func (s *server) closeDecisionLog() {
	if s.decisionLog == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), decisionlog.CloseTimeout)
	defer cancel()
	if err := s.decisionLog.Close(ctx); err != nil {
		s.log.WithError(err).Warn("decision log: closing")
	}
}
