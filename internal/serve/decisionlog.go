package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/decisionlog"
)

// Defaults of the decision log's HTTP target.
const (
	// DefaultDecisionLogTimeout bounds one upload: a collector that does
	// not answer in time costs dropped events, never a slower verb.
	DefaultDecisionLogTimeout = 10 * time.Second
	// decisionLogCloseTimeout bounds the last flush at shutdown, after
	// the verbs have drained, so that a stalled collector cannot hold the
	// leader lease.
	decisionLogCloseTimeout = 5 * time.Second
)

// newDecisionLog starts the --decision-log logger, its dropped counter
// registered on reg.
func newDecisionLog(opts Options, reg prometheus.Registerer, log logrus.FieldLogger) (*decisionlog.Logger, error) {
	o := opts.DecisionLog
	sink, err := decisionLogSink(o)
	if err != nil {
		return nil, err
	}
	id := opts.Leader.Identity
	if id == "" {
		id = "regosched"
	}
	l, err := decisionlog.New(decisionlog.Config{
		Sink: sink, SampleRate: o.SampleRate,
		MaskLabels: o.MaskLabels, MaskMode: decisionlog.MaskMode(o.MaskMode),
		MaxEvents: o.BufferEvents, FlushInterval: o.FlushInterval,
		InstanceID: id, Version: opts.Version,
		Registerer: reg, Log: log,
	})
	if err != nil {
		_ = sink.Close()
		return nil, fmt.Errorf("--decision-log: %w", err)
	}
	log.WithFields(logrus.Fields{"target": o.Target, "sample": o.SampleRate}).Info("decision log on")
	return l, nil
}

// decisionLogSink is the sink Target names.
func decisionLogSink(o DecisionLogOptions) (decisionlog.Sink, error) {
	isHTTP, err := o.http()
	switch {
	case err != nil:
		return nil, err
	case o.Target == DecisionLogStdout:
		return decisionlog.NewWriterSink(os.Stdout), nil
	case !isHTTP:
		sink, err := decisionlog.NewFileSink(o.Target)
		if err != nil {
			return nil, fmt.Errorf("--decision-log: %w", err)
		}
		return sink, nil
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultDecisionLogTimeout
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if o.CACertFile != "" {
		pem, err := os.ReadFile(o.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("--decision-log-ca-cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--decision-log-ca-cert %s: no PEM certificate in it", o.CACertFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	retries := o.MaxRetries
	if retries == 0 {
		retries = -1 // the sink's 0 means its default; the flag's means none
	}
	sink, err := decisionlog.NewHTTPSink(decisionlog.HTTPConfig{
		URL: o.Target, Client: &http.Client{Timeout: timeout, Transport: transport},
		UploadSizeLimitBytes: o.UploadLimitBytes, MaxRetries: retries, BearerTokenFile: o.BearerTokenFile,
	})
	if err != nil {
		return nil, fmt.Errorf("--decision-log: %w", err)
	}
	return sink, nil
}

// closeDecisionLog sends what the decision log holds, within
// decisionLogCloseTimeout; a collector that does not take it costs those
// events (counted), not a failed shutdown.
func (s *server) closeDecisionLog() {
	if s.decisionLog == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), decisionLogCloseTimeout)
	defer cancel()
	if err := s.decisionLog.Close(ctx); err != nil {
		s.log.WithError(err).Warn("decision log: closing")
	}
}
