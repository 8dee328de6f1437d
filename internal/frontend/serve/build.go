package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/frontend/assembly"
	"github.com/regosched/regosched/internal/frontend/decision"
	"github.com/regosched/regosched/internal/frontend/extender"
	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/ops/certroll"
	"github.com/regosched/regosched/internal/plumbing/apicontact"
	"github.com/regosched/regosched/internal/plumbing/kubeclient"
	"github.com/regosched/regosched/internal/plumbing/leader"
	"github.com/regosched/regosched/internal/plumbing/tlsserve"
	"github.com/regosched/regosched/internal/redis/redisroles"
)

// server is what build makes and run starts, for the life of one Run.
type server struct {
	opts Options
	log  logrus.FieldLogger

	// parts are the policy, the placement cache, the shadow policy and
	// the decision log, opened as regosched-scheduler's plugin opens them.
	parts *assembly.Parts

	pending         *placement.Pending // nil without the verbs
	describePending placement.DescribeFunc
	contact         *apicontact.Watch
	roles           *redisroles.Controller // nil without --redis-roles
	elector         *leader.Elector        // nil without --leader-elect
	audit           *audit.Auditor         // nil without an audit interval
	certRoll        *certroll.Config       // nil without --scheduler-client-secret
	recorder        events.EventRecorder
	stopEvents      func() // flushes and stops recorder
	// auditTrigger asks the audit for a pass when a bound pod is relabelled
	// (a role moved at failover can break a rule where it stands).
	auditTrigger chan struct{}

	listeners []net.Listener
	servers   []*http.Server // one per listener
	tls       bool
}

// NoVerbs is what a verb call answers, with 404, under --verbs=false.
const NoVerbs = "this regosched serves no scheduler verbs (--verbs=false): regosched-scheduler decides in process"

// build loads the first policy and makes every part, listening already but
// running nothing.
func build(ctx context.Context, opts Options) (_ *server, err error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	log := opts.Log
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s := &server{opts: opts, log: log, auditTrigger: make(chan struct{}, 1)}
	var client, background kubernetes.Interface
	if s.parts, client, background, err = s.open(ctx, reg); err != nil {
		return nil, err
	}
	if s.recorder, s.stopEvents, err = newRecorder(ctx, background); err != nil {
		s.closeDecisionLog()
		return nil, err
	}
	// The decision log's and the recorder's goroutines must not outlive a
	// build that fails.
	defer func() {
		if err != nil {
			s.closeDecisionLog()
			s.stopEvents()
		}
	}()
	if err := s.buildPending(client, reg); err != nil {
		return nil, err
	}
	if opts.LeaderElect {
		if s.elector, err = leader.New(client, opts.Leader, log.WithField("component", "leader")); err != nil {
			return nil, err
		}
	}
	if opts.RedisRoles.On {
		leading := func() bool { return s.elector == nil || s.elector.Leading() }
		if s.roles, err = newRedisRoles(opts, background, s.parts.Active, reg, leading); err != nil {
			return nil, err
		}
	}
	var decider extender.Decider // nil without the verbs
	if opts.Verbs {
		if decider, err = s.newDecider(client, reg); err != nil {
			return nil, err
		}
	}
	if s.contact, err = apicontact.New(apicontact.Config{
		Ping: pingAPI(client), Threshold: opts.APILostAfter, Registerer: reg, Log: log.WithField("component", "api-contact"),
	}); err != nil {
		return nil, err
	}
	if opts.CertRoll.On() {
		s.certRoll = &certroll.Config{
			Client: background, Namespace: opts.Leader.PodNamespace,
			Secret: opts.CertRoll.Secret, Deployment: opts.CertRoll.Deployment,
			Leading: func() bool { return s.elector == nil || s.elector.Leading() },
			Log:     log.WithField("component", "certroll"),
		}
	}
	if opts.AuditInterval > 0 {
		if s.audit, err = newAudit(s.auditParts(background, reg)); err != nil {
			return nil, err
		}
	}
	if err := s.buildHTTP(decider, reg); err != nil {
		return nil, err
	}
	return s, nil
}

// newDecider builds what answers the verbs, over the cache, the pending
// pods and the Redis roles' memory.
func (s *server) newDecider(client kubernetes.Interface, reg prometheus.Registerer) (*decision.Decider, error) {
	opts := s.opts
	dopts := decision.Options{
		InFlightTTL: opts.InFlightTTL,
		MaxWait:     opts.InFlightWait,
		Client:      client,
		// Binds and reservations only for the profile's own pods.
		SchedulerName: opts.SchedulerName,
		SoftInFilter:  opts.SoftInFilter,
		Pending:       s.pending,
		Recorder:      s.recorder,
	}
	if s.roles != nil {
		dopts.Recall = s.roles.Recall
	}
	if p := s.parts; p.Shadow != nil { // not a typed nil in the interface
		dopts.Shadow = p.Shadow.Shadow
	}
	if p := s.parts; p.DecisionLog != nil { // likewise
		dopts.DecisionLog = p.DecisionLog
	}
	return decision.New(s.parts.Cache, s.parts.Active, s.log.WithField("component", "decision"), reg, dopts)
}

// newClients gives the client of the verbs and informers, and the client
// of the writes that are not binds, each with its own rate limit: an audit
// pass that emits many Events, or Redis roles that relabel many pods after
// a failover, must not queue the binds behind them. opts.Client, when set,
// serves as both.
func newClients(opts Options) (verbs, background kubernetes.Interface, err error) {
	if opts.Client != nil {
		return opts.Client, opts.Client, nil
	}
	cfg, err := kubeclient.Config(kubeclient.Target{Kubeconfig: opts.Kubeconfig, Context: opts.KubeContext})
	if err != nil {
		return nil, nil, err
	}
	verbs, err = kubernetes.NewForConfig(kubeclient.Fast(cfg, opts.KubeAPIQPS, opts.KubeAPIBurst))
	if err != nil {
		return nil, nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	qps, burst := opts.BackgroundQPS, opts.BackgroundBurst
	if qps <= 0 {
		qps = max(opts.KubeAPIQPS/5, 1)
	}
	if burst <= 0 {
		burst = max(opts.KubeAPIBurst/5, 1)
	}
	background, err = kubernetes.NewForConfig(kubeclient.Fast(cfg, qps, burst))
	if err != nil {
		return nil, nil, fmt.Errorf("creating Kubernetes client for background writes: %w", err)
	}
	return verbs, background, nil
}

// buildPending makes, for the verbs, the descriptions of the profile's
// pending pods, made again under each reloaded policy (open's Reindexed).
func (s *server) buildPending(client kubernetes.Interface, reg prometheus.Registerer) error {
	if !s.opts.Verbs {
		// Pending pods are described for filter calls alone.
		return nil
	}
	unprotected, err := policy.NewUnprotectedWatch(reg, s.log.WithField("component", "protection"))
	if err != nil {
		return err
	}
	s.describePending = policy.PendingDescriber(s.parts.Active.Load, unprotected)
	if s.pending, err = placement.NewPending(client, s.opts.SchedulerName, s.describePending, s.log.WithField("component", "pending")); err != nil {
		return err
	}
	return s.pending.RegisterMetrics(reg)
}

// ready is readiness: synced, with a policy, and in contact with the API
// server.
func (s *server) ready() error {
	if !s.parts.Cache.HasSynced() {
		return errors.New("placement cache has not synced with the API server yet")
	}
	if s.parts.Active.Load() == nil {
		return policy.ErrNoPolicy
	}
	return s.contact.Err()
}

// buildHTTP makes the handler and listens on Listen, and on HealthListen
// when set.
func (s *server) buildHTTP(decider extender.Decider, reg *prometheus.Registry) error {
	opts := s.opts
	apiConfig := extender.Config{
		URLPrefix:     opts.URLPrefix,
		MaxBodyBytes:  opts.MaxBodyBytes,
		MaxConcurrent: opts.MaxConcurrent,
		Decider:       decider,
		// Every synced replica is ready, so that a rollout and a drain
		// proceed; a standby refuses the verbs all the same.
		Ready: s.ready,
		Serving: func() error {
			if err := s.ready(); err != nil {
				return err
			}
			if s.elector != nil && !s.elector.Leading() {
				return errors.New("not the leader")
			}
			return nil
		},
		VerbsOnly: opts.HealthListen != "",
		Version: func() any {
			return struct {
				Version string `json:"version"`
				bundles.Status
			}{opts.Version, s.parts.Active.Status()}
		},
		Registerer: reg,
		Gatherer:   reg,
		Profiling:  opts.Profiling,
		Log:        s.log.WithField("component", "extender"),
	}
	if !opts.Verbs {
		apiConfig.NoVerbs = NoVerbs
	}
	handler, err := extender.New(apiConfig)
	if err != nil {
		return err
	}
	var tlsConfig *tls.Config
	if opts.TLS.CertFile != "" || opts.TLS.KeyFile != "" || opts.TLS.ClientCAFile != "" {
		certs, err := tlsserve.New(opts.TLS, s.log.WithField("component", "tls"))
		if err != nil {
			return err
		}
		tlsConfig = certs.Config()
	}
	s.tls = tlsConfig != nil
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", opts.Listen, err)
	}
	s.listeners = append(s.listeners, ln)
	s.servers = append(s.servers, &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 5 * time.Second,
		// The scheduler's own httpTimeout is 5s by default; nothing
		// legitimate takes longer than these.
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  2 * time.Minute,
	})
	if opts.HealthListen == "" {
		return nil
	}
	healthLn, err := net.Listen("tcp", opts.HealthListen)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("listening on %s (health): %w", opts.HealthListen, err)
	}
	s.listeners = append(s.listeners, healthLn)
	s.servers = append(s.servers, &http.Server{
		Handler:           extender.NewHealth(apiConfig),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	})
	return nil
}
