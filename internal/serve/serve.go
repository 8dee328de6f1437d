// Package serve wires regosched's parts into the running extender: the
// Kubernetes client, the placement cache, the policy, the decider and the
// HTTP server, with readiness tied to the cache and the policy.
package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"

	"github.com/regosched/regosched/internal/apicontact"
	"github.com/regosched/regosched/internal/audit"
	"github.com/regosched/regosched/internal/decision"
	"github.com/regosched/regosched/internal/extender"
	"github.com/regosched/regosched/internal/leader"
	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
	"github.com/regosched/regosched/internal/redisroles"
	"github.com/regosched/regosched/internal/tlsserve"
)

// Options are the settings of `regosched serve`.
type Options struct {
	Listen string
	// HealthListen, when set, serves /healthz, /readyz, /version and
	// /metrics (and nothing else) over plain HTTP on a second address, for
	// probes that cannot present a client certificate to Listen.
	HealthListen string
	Kubeconfig   string
	// Client, when set, is used instead of one built from Kubeconfig.
	Client kubernetes.Interface
	// APILostAfter is how long the API server may not answer before
	// readiness turns false (0: apicontact.DefaultThreshold).
	APILostAfter time.Duration
	// PolicyPath is a bundle directory, a .tar.gz or an http(s) URL of a
	// bundle server; empty means DefaultPolicy.
	PolicyPath    string
	DefaultPolicy fs.FS
	// PolicyData is a JSON file merged into the policy's
	// data.regosched.config (policy.Options.DataFile), watched with
	// PolicyPoll; empty: none.
	PolicyData   string
	URLPrefix    string
	MaxBodyBytes int64
	// MaxConcurrent bounds the verb requests served at once.
	MaxConcurrent int
	// InFlightTTL and InFlightWait bound the wait for peers that passed
	// filter but whose binding is not yet seen (see decision.Options).
	InFlightTTL  time.Duration
	InFlightWait time.Duration
	// SoftInFilter folds the soft rules into filter (see
	// decision.Options).
	SoftInFilter bool
	// SchedulerName is the profile whose pending pods are described as
	// soon as they are created, ahead of their filter calls; empty: each
	// filter call describes its pod.
	SchedulerName string
	// PolicyPoll is how often --policy is checked for changes; 0 disables
	// reloading. Unused for the embedded policy.
	PolicyPoll time.Duration
	// Bundles says how bundles are checked and a bundle server is polled.
	Bundles BundleOptions
	// KubeAPIQPS and KubeAPIBurst bound the API requests (binds, reads).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// TLS, when its CertFile is set, serves HTTPS (with client certificate
	// authentication when ClientCAFile is set too).
	TLS tlsserve.Files
	// LeaderElect makes replicas elect one leader through a Lease: every
	// synced replica is ready, the leader alone answers the verbs and labels
	// its pod (leader.Label) for the Service to select.
	LeaderElect bool
	Leader      leader.Config
	// RedisRoles, when On, reads Redis pods' roles from Redis and writes
	// them onto the pods (see redisroles).
	RedisRoles RedisRolesOptions
	// AuditInterval is the period of the audit of bound pods (the leader
	// only); 0 turns it off.
	AuditInterval time.Duration
	// Profiling serves pprof profiles under /debug/pprof/.
	Profiling bool
	Version   string
	Log       logrus.FieldLogger
}

// BundleOptions are the checks every bundle passes before it is activated
// and, for an http(s) PolicyPath, how the bundle server is polled.
type BundleOptions struct {
	// VerificationKey, when set, requires signed bundles: a PEM public key
	// file, or the secret for HS* algorithms (see policy.NewVerification).
	VerificationKey   string
	VerificationKeyID string
	SigningAlg        string
	Scope             string
	// RunTests runs each bundle's *_test.rego tests before activating it.
	RunTests bool
	// MinDelay and MaxDelay bound the wait between polls of a bundle
	// server; LongPollingTimeout > 0 turns long polling on.
	MinDelay, MaxDelay, LongPollingTimeout time.Duration
	// StartTimeout bounds the wait for the first good bundle from a server:
	// regosched never serves without a policy.
	StartTimeout    time.Duration
	BearerTokenFile string
	// MaxBytes caps each file of a bundle and a downloaded bundle's size
	// (0: policy.DefaultBundleSizeLimit).
	MaxBytes int64
	// Insecure allows a plain http:// bundle URL with a bearer token or
	// without a verification key.
	Insecure bool
}

// RedisRolesOptions are the settings of --redis-roles.
type RedisRolesOptions struct {
	On       bool
	Interval time.Duration
	// PasswordFile holds the password of every Redis; PodSecrets reads the
	// Secret behind each pod's own REDIS_PASSWORD instead.
	PasswordFile string
	PodSecrets   bool
	// TLS to Redis: on with TLS, verified with CAFile (the system's roots
	// when empty) unless SkipVerify; CertFile/KeyFile as client certificate.
	TLS                       bool
	CAFile, CertFile, KeyFile string
	ServerName                string
	SkipVerify                bool
	// Memory names the ConfigMap, in the leader election namespace, that
	// keeps the last known roles across restarts.
	Memory string
}

// Run serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, opts Options) error {
	log := opts.Log
	pol, source, remote, err := loadPolicy(ctx, opts)
	if err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"source": source, "revision": pol.Revision()}).Info("policy loaded")

	client := opts.Client
	if client == nil {
		cfg, err := clientConfig(opts.Kubeconfig, opts.KubeAPIQPS, opts.KubeAPIBurst)
		if err != nil {
			return err
		}
		if client, err = kubernetes.NewForConfig(cfg); err != nil {
			return fmt.Errorf("creating Kubernetes client: %w", err)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	active, err := policy.NewActive(reg)
	if err != nil {
		return err
	}
	active.Store(pol.Policy)

	keys := policy.Describer(active.Load)
	// A relabelled bound pod (a role moved at failover) can break a rule
	// where it stands: it triggers an audit pass.
	auditTrigger := make(chan struct{}, 1)
	relabelled := func() {
		select {
		case auditTrigger <- struct{}{}:
		default:
		}
	}
	cache, err := placement.New(client, keys, log.WithField("component", "placement"), placement.WithOnRelabel(relabelled))
	if err != nil {
		return err
	}
	if err := cache.RegisterMetrics(reg); err != nil {
		return err
	}
	dopts := decision.Options{
		InFlightTTL: opts.InFlightTTL,
		MaxWait:     opts.InFlightWait,
		Client:      client,
		// Binds and reservations only for the profile's own pods.
		SchedulerName: opts.SchedulerName,
		SoftInFilter:  opts.SoftInFilter,
	}
	unprotected, err := policy.NewUnprotectedWatch(reg, log.WithField("component", "protection"))
	if err != nil {
		return err
	}
	describePending := unprotected.Wrap(policy.PendingDescriber(active.Load))
	var pending *placement.Pending
	if opts.SchedulerName != "" {
		if pending, err = placement.NewPending(client, opts.SchedulerName, describePending, log.WithField("component", "pending")); err != nil {
			return err
		}
		if err := pending.RegisterMetrics(reg); err != nil {
			return err
		}
		dopts.Pending = pending
	}
	var elector *leader.Elector
	var roles *redisroles.Controller
	if opts.RedisRoles.On {
		// elector is set below, before roles runs: only the leader writes.
		leading := func() bool { return elector == nil || elector.Leading() }
		if roles, err = newRedisRoles(opts, client, active, reg, leading); err != nil {
			return err
		}
		dopts.Recall = roles.Recall
	}
	decider, err := decision.New(cache, active, log.WithField("component", "decision"), reg, dopts)
	if err != nil {
		return err
	}
	if opts.LeaderElect {
		if elector, err = leader.New(client, opts.Leader, log.WithField("component", "leader")); err != nil {
			return err
		}
	}
	contact, err := apicontact.New(apicontact.Config{
		Ping: pingAPI(client), Threshold: opts.APILostAfter, Registerer: reg, Log: log.WithField("component", "api-contact"),
	})
	if err != nil {
		return err
	}
	ready := func() error {
		if !cache.HasSynced() {
			return errors.New("placement cache has not synced with the API server yet")
		}
		if active.Load() == nil {
			return errors.New("no active policy")
		}
		return contact.Err()
	}
	apiConfig := extender.Config{
		URLPrefix:     opts.URLPrefix,
		MaxBodyBytes:  opts.MaxBodyBytes,
		MaxConcurrent: opts.MaxConcurrent,
		Decider:       decider,
		// Every synced replica is ready, so that a rollout and a drain
		// proceed; a standby refuses the verbs all the same.
		Ready: ready,
		Serving: func() error {
			if err := ready(); err != nil {
				return err
			}
			if elector != nil && !elector.Leading() {
				return errors.New("not the leader")
			}
			return nil
		},
		VerbsOnly: opts.HealthListen != "",
		Version: func() any {
			return struct {
				Version string `json:"version"`
				policy.Status
			}{opts.Version, active.Status()}
		},
		Registerer: reg,
		Gatherer:   reg,
		Profiling:  opts.Profiling,
		Log:        log.WithField("component", "extender"),
	}
	handler, err := extender.New(apiConfig)
	if err != nil {
		return err
	}

	var tlsConfig *tls.Config
	if opts.TLS.CertFile != "" || opts.TLS.KeyFile != "" || opts.TLS.ClientCAFile != "" {
		certs, err := tlsserve.New(opts.TLS, log.WithField("component", "tls"))
		if err != nil {
			return err
		}
		tlsConfig = certs.Config()
	}

	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", opts.Listen, err)
	}
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 5 * time.Second,
		// The scheduler's own httpTimeout is 5s by default; nothing
		// legitimate takes longer than these.
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  2 * time.Minute,
	}
	servers := []*http.Server{srv}
	var healthLn net.Listener
	if opts.HealthListen != "" {
		if healthLn, err = net.Listen("tcp", opts.HealthListen); err != nil {
			_ = ln.Close()
			return fmt.Errorf("listening on %s (health): %w", opts.HealthListen, err)
		}
		servers = append(servers, &http.Server{
			Handler:           extender.NewHealth(apiConfig),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
		})
	}
	ctx, cancel := context.WithCancel(ctx)
	cache.Start(ctx)
	if pending != nil {
		// Not waited for: a pod it has not described yet is described by
		// its filter call.
		pending.Start(ctx)
	}
	// The informers stop only once ctx is cancelled: cancel, then wait.
	defer func() {
		cancel()
		cache.Shutdown()
		if pending != nil {
			pending.Shutdown()
		}
	}()
	go contact.Run(ctx)
	go func() {
		if cache.WaitForSync(ctx) {
			log.WithFields(logrus.Fields{"pods": cache.PodCount(), "nodes": cache.NodeCount()}).Info("placement cache synced; ready")
		}
	}()

	// A new policy may group pods differently: the cache builds its index
	// under the new policy beside the old one and swaps index and policy
	// together; the pending pods are then described again under it.
	reindex := func(ctx context.Context, p *policy.Policy, store func()) {
		if err := cache.SetKeyFunc(ctx, policy.Describer(func() *policy.Policy { return p }), store); err != nil {
			log.WithError(err).Warn("policy not activated")
			return
		}
		if pending != nil {
			pending.SetDescribeFunc(ctx, describePending)
		}
	}
	switch {
	case remote != nil:
		remote.Active, remote.Activate = active, reindex
		go remote.Run(ctx)
	case (opts.PolicyPath != "" || opts.PolicyData != "") && opts.PolicyPoll > 0:
		w := &policy.Watcher{
			Path: opts.PolicyPath, FS: opts.DefaultPolicy, Interval: opts.PolicyPoll, Options: pol.opts, Active: active,
			Log: log.WithField("component", "policy"), Activate: reindex, Loaded: pol.fingerprint,
		}
		go w.Run(ctx)
	}

	if roles != nil {
		go func() {
			if err := roles.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.WithError(err).Error("Redis roles stopped")
			}
		}()
	}

	if opts.AuditInterval > 0 {
		stopAudit, err := startAudit(ctx, client, cache, active, elector, reg, log, opts.AuditInterval, auditTrigger)
		if err != nil {
			return err
		}
		defer stopAudit()
	}

	// The elector outlives ctx: the lease is released only once the
	// in-flight binds have drained, or another replica could decide against
	// placements this one is still making.
	var lost <-chan struct{}
	if elector != nil {
		lost = elector.Lost()
		electCtx, stopElect := context.WithCancel(context.WithoutCancel(ctx))
		elected := make(chan struct{})
		defer func() { stopElect(); <-elected }()
		go func() { elector.Run(electCtx); close(elected) }()
	}

	errc := make(chan error, len(servers))
	go func() {
		if tlsConfig != nil {
			errc <- srv.ServeTLS(ln, "", "") // certificates come from TLSConfig
			return
		}
		errc <- srv.Serve(ln)
	}()
	log.WithFields(logrus.Fields{
		"address": ln.Addr().String(), "urlPrefix": opts.URLPrefix,
		"tls": tlsConfig != nil, "clientAuth": opts.TLS.ClientCAFile != "",
	}).Info("serving")
	if healthLn != nil {
		go func() { errc <- servers[1].Serve(healthLn) }()
		log.WithField("address", healthLn.Addr().String()).Info("serving health endpoints over plain HTTP")
	}
	var runErr error
	select {
	case err := <-errc:
		for _, s := range servers {
			_ = s.Close() // the other listener must not outlive Run
		}
		return fmt.Errorf("serving HTTP: %w", err)
	case <-lost:
		// Another replica may lead now; this one's in-flight state is stale.
		runErr = errors.New("lost the leader lease")
	case <-ctx.Done():
	}
	log.Info("shutting down: draining requests in flight")
	shutdownCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	for _, s := range servers {
		if err := s.Shutdown(shutdownCtx); err != nil {
			return fmt.Errorf("shutting down HTTP server: %w", err)
		}
	}
	log.Info("requests drained")
	if elector != nil {
		// Unlabelled before the lease is released (by the deferred stopElect).
		stepCtx, cancelStep := context.WithTimeout(context.Background(), 5*time.Second)
		if err := elector.StepDown(stepCtx); err != nil {
			log.WithError(err).Warn("cannot remove the leader label before releasing the lease")
		}
		cancelStep()
	}
	return runErr
}

// pingAPI asks the API server for one node: any answer, even a refusal,
// shows that it is in reach.
func pingAPI(client kubernetes.Interface) apicontact.Ping {
	return func(ctx context.Context) error {
		_, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		var status apierrors.APIStatus
		if err != nil && errors.As(err, &status) && status.Status().Code < http.StatusInternalServerError {
			return nil
		}
		return err
	}
}

// startAudit runs the audit of bound pods once the cache has synced and
// this replica leads (another replica would announce the same violations
// twice); the returned function stops its event recorder.
func startAudit(ctx context.Context, client kubernetes.Interface, cache *placement.Cache, active *policy.Active, elector *leader.Elector,
	reg prometheus.Registerer, log logrus.FieldLogger, interval time.Duration, trigger <-chan struct{}) (func(), error) {
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("starting the event recorder: %w", err)
	}
	a, err := audit.New(audit.Config{
		Cache: cache, Policies: active.Load, Recorder: broadcaster.NewRecorder(scheme.Scheme, "regosched"),
		Log: log.WithField("component", "audit"), Registerer: reg,
	})
	if err != nil {
		broadcaster.Shutdown()
		return nil, err
	}
	go func() {
		if !cache.WaitForSync(ctx) {
			return
		}
		for elector != nil && !elector.Leading() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		a.Loop(ctx, interval, trigger)
	}()
	return broadcaster.Shutdown, nil
}

// newRedisRoles builds the --redis-roles controller, which writes only
// while leading.
func newRedisRoles(opts Options, client kubernetes.Interface, active *policy.Active, reg prometheus.Registerer, leading func() bool) (*redisroles.Controller, error) {
	o := opts.RedisRoles
	cfg := redisroles.Config{
		Client: client, Policy: active.Load, Interval: o.Interval,
		PasswordFile: o.PasswordFile, PodSecrets: o.PodSecrets,
		MemoryNamespace: opts.Leader.Namespace, MemoryName: o.Memory,
		Leading: leading, Registerer: reg, Log: opts.Log.WithField("component", "redis-roles"),
	}
	if o.TLS {
		tlsConfig, err := redisroles.TLSConfig(o.CAFile, o.CertFile, o.KeyFile, o.ServerName, o.SkipVerify)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tlsConfig
	}
	return redisroles.New(cfg)
}

// loadPolicy reads, checks and compiles the first policy; for a bundle
// server it also returns the Remote that keeps polling it.
func loadPolicy(ctx context.Context, opts Options) (loaded, string, *policy.Remote, error) {
	var popts policy.Options
	bo := opts.Bundles
	popts.RunTests = bo.RunTests
	popts.SizeLimitBytes = bo.MaxBytes
	popts.DataFile = opts.PolicyData
	if bo.VerificationKey != "" && opts.PolicyData != "" {
		// What a signed bundle runs with must be what was signed.
		return loaded{}, "", nil, errors.New("--policy-data cannot be combined with --policy-verification-key: a signed bundle's data is what was signed; put the settings in the bundle")
	}
	if bo.VerificationKey != "" {
		if opts.PolicyPath == "" {
			// The embedded policy carries no signature: running it would
			// silently skip the check the key asks for.
			return loaded{}, "", nil, errors.New("--policy-verification-key needs a signed --policy bundle: the embedded default policy is unsigned")
		}
		vc, err := policy.NewVerification(bo.VerificationKey, bo.VerificationKeyID, bo.SigningAlg, bo.Scope)
		if err != nil {
			return loaded{}, "", nil, err
		}
		popts.Verification = vc
	}
	if policy.IsRemote(opts.PolicyPath) {
		r := &policy.Remote{
			URL: opts.PolicyPath, MinDelay: bo.MinDelay, MaxDelay: bo.MaxDelay, LongPollingTimeout: bo.LongPollingTimeout,
			BearerTokenFile: bo.BearerTokenFile, Insecure: bo.Insecure, Options: popts, Log: opts.Log.WithField("component", "policy"),
		}
		p, err := r.First(ctx, bo.StartTimeout)
		if err != nil {
			return loaded{}, "", nil, err
		}
		return loaded{Policy: p, opts: popts}, opts.PolicyPath, r, nil
	}
	var b *bundle.Bundle
	var err error
	source := opts.PolicyPath
	var fp string
	// Before the load: a change made while the first policy is being
	// compiled is then still a change to the watcher.
	if fp, err = policy.WatchFingerprint(source, opts.PolicyData); err != nil {
		return loaded{}, "", nil, err
	}
	if source == "" {
		source = "embedded default policy"
		b, err = popts.LoadFS(opts.DefaultPolicy, source)
	} else {
		b, err = popts.Load(source)
	}
	if err != nil {
		return loaded{}, "", nil, err
	}
	p, err := popts.Compile(ctx, b)
	if err != nil {
		return loaded{}, "", nil, fmt.Errorf("policy %s: %w", source, err)
	}
	return loaded{p, popts, fp}, source, nil, nil
}

// loaded is the first policy and the checks later bundles pass too.
type loaded struct {
	*policy.Policy
	opts policy.Options
	// fingerprint of a --policy file or directory, taken before loading it.
	fingerprint string
}

// clientConfig is the configuration of regosched's API client: the
// kubeconfig of restConfig, the rate limits, and protobuf, as kube-scheduler
// itself uses: decoding the watch events of every pod in JSON costs regosched
// more CPU than its decisions do.
func clientConfig(path string, qps float32, burst int) (*rest.Config, error) {
	cfg, err := restConfig(path)
	if err != nil {
		return nil, err
	}
	// client-go's defaults (5 QPS, burst 10) would pace binds at 5 per second.
	cfg.QPS, cfg.Burst = qps, burst
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg, nil
}

// restConfig follows kubectl's rules: an explicit path, else in-cluster,
// else $KUBECONFIG, else ~/.kube/config.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}
