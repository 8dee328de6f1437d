package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/frontend/extender"
	"github.com/regosched/regosched/internal/frontend/serve"
	"github.com/regosched/regosched/internal/frontend/settings"
	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/ops/repair"
	"github.com/regosched/regosched/internal/plumbing/apicontact"
	"github.com/regosched/regosched/internal/plumbing/logbridge"
	"github.com/regosched/regosched/internal/plumbing/version"
)

// serveFunc runs `regosched serve` with the options its flags gave:
// runServe in the binary, a recorder in tests.
type serveFunc func(ctx context.Context, opts serve.Options, logger *logrus.Logger) error

// serveFlags are the flags of `regosched serve`: most land in opts
// directly, the others are checked and converted by options.
type serveFlags struct {
	opts                                   serve.Options
	softRules, repair, logLevel, logFormat string
	qps, backgroundQPS                     float64
}

func newServeCommand(run serveFunc) *cobra.Command {
	f := &serveFlags{opts: serve.Options{Policy: bundles.Config{Default: regosched.DefaultPolicy()}, Version: version.Get().Version}}
	cmd := &cobra.Command{
		Use:               "serve",
		Short:             "Serve the extender: filter, prioritize, preempt and bind for kube-scheduler",
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, logger, err := f.options(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return run(cmd.Context(), opts, logger)
		},
	}
	addClusterFlags(cmd, &f.opts.Kubeconfig, &f.opts.KubeContext)
	fs := cmd.Flags()
	fs.StringVar(&f.opts.Listen, "listen", ":8888", "address to serve the extender API, health and metrics on")
	// The policy's, the shadow policy's and the decision log's flags are
	// the plugin's args, named and defaulted once in settings.
	addSettings(fs, settings.Policy(&f.opts.Policy)...)
	addSettings(fs, settings.ShadowPolicy(&f.opts.ShadowPolicy))
	addSettings(fs, settings.DecisionLog(&f.opts.DecisionLog)...)
	fs.StringVar(&f.opts.HealthListen, "health-listen", "", "also serve /healthz, /readyz, /version and /metrics (never the verbs) over plain HTTP on this address, for probes without a client certificate (default: off)")
	fs.StringVar(&f.opts.URLPrefix, "url-prefix", "/scheduler", "path prefix of the extender verbs, as in the scheduler's urlPrefix")
	fs.Int64Var(&f.opts.MaxBodyBytes, "max-request-bytes", extender.DefaultMaxBodyBytes, "largest request body accepted (413 above)")
	fs.IntVar(&f.opts.MaxConcurrent, "max-concurrent-requests", extender.DefaultMaxConcurrent, "verb requests served at once; more wait for a slot, so a flood cannot hold every body in memory")
	fs.DurationVar(&f.opts.InFlightTTL, "inflight-ttl", placement.DefaultInFlightTTL, "how long a pod that passed filter holds its peers back while its binding is not seen")
	fs.BoolVar(&f.opts.Verbs, "verbs", true, "serve the scheduler extender verbs (filter, prioritize, preempt, bind); false runs regosched beside regosched-scheduler for Redis roles, the audit and the repair")
	fs.StringVar(&f.opts.SchedulerName, "scheduler-name", "regosched", "schedulerName of the profile that calls regosched: only its pods are reserved and bound, and its pending pods are described by the policy as soon as they are created, off the scheduling cycle (required with --verbs)")
	fs.StringVar(&f.softRules, "soft-rules", "filter", "where the soft rules act: filter (filter keeps only the candidates of the lowest penalty and reports the others as unresolvable; the scheduler's extender entry needs no prioritizeVerb, one round trip less per pod) or prioritize (scores; the entry must have prioritizeVerb, or the soft rules act nowhere); see docs/policies.md")
	fs.DurationVar(&f.opts.InFlightWait, "inflight-wait", 2*time.Second, "longest a filter call waits for in-flight peers (keep well under the scheduler's httpTimeout); 0 turns in-flight tracking off")
	fs.StringVar(&f.opts.TLS.CertFile, "tls-cert-file", "", "serve HTTPS with this PEM certificate (reloaded when it changes)")
	fs.StringVar(&f.opts.TLS.KeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&f.opts.TLS.ClientCAFile, "client-ca-file", "", "require client certificates signed by a CA in this PEM file (reloaded when it changes)")
	fs.Var(commaList{&f.opts.TLS.AllowedClientNames}, "tls-allowed-client-names", "--client-ca-file: comma-separated names (subject CN, DNS or URI SAN) of the only client certificates accepted, such as the scheduler's; others signed by the same CA are refused at the handshake (default: any the CA signed)")
	fs.Float64Var(&f.qps, "kube-api-qps", 100, "queries per second to the API server (binds, reads)")
	fs.IntVar(&f.opts.KubeAPIBurst, "kube-api-burst", 200, "burst of queries to the API server")
	fs.Float64Var(&f.backgroundQPS, "kube-api-background-qps", 20, "queries per second for the writes that are not binds (audit Events, Redis role labels and their ConfigMap), on a client of their own so that they never delay a bind")
	fs.IntVar(&f.opts.BackgroundBurst, "kube-api-background-burst", 40, "burst of --kube-api-background-qps")
	fs.BoolVar(&f.opts.LeaderElect, "leader-elect", false, "elect one leader among replicas through a Lease: every synced replica is ready, only the leader answers the verbs and labels its pod regosched.io/leader=true for the Service to select")
	fs.StringVar(&f.opts.Leader.PodName, "pod-name", os.Getenv("POD_NAME"), "--leader-elect: this replica's own pod, which carries the leader label while it leads (default $POD_NAME; empty: no label)")
	fs.StringVar(&f.opts.Leader.PodNamespace, "pod-namespace", inClusterNamespace(), "--leader-elect: namespace of --pod-name")
	fs.DurationVar(&f.opts.APILostAfter, "api-lost-after", apicontact.DefaultThreshold, "readiness turns false once the API server has not answered for this long: decisions would rest on a stale cache")
	fs.StringVar(&f.opts.Leader.Namespace, "leader-elect-namespace", inClusterNamespace(), "namespace of the leader Lease")
	fs.StringVar(&f.opts.Leader.Name, "leader-elect-name", "regosched", "name of the leader Lease")
	fs.BoolVar(&f.opts.RedisRoles.On, "redis-roles", false, "read the role (and, in cluster mode, the shard) of every pod the policy reads roles live for from Redis itself (ROLE, CLUSTER NODES) and write it onto the pod as labels regosched.io/role and regosched.io/shard")
	fs.DurationVar(&f.opts.RedisRoles.Interval, "redis-roles-interval", 10*time.Second, "--redis-roles: how often every Redis pod is asked again (pod events also trigger a check)")
	fs.StringVar(&f.opts.RedisRoles.PasswordFile, "redis-password-file", "", "--redis-roles: file holding the password of every Redis (default: the pod's own REDIS_PASSWORD, else none)")
	fs.Var(commaList{&f.opts.RedisRoles.PasswordNamespaces}, "redis-password-namespaces", "--redis-password-file: comma-separated namespaces whose Redis pods are sent that password (required with it); pods elsewhere use their own REDIS_PASSWORD")
	fs.BoolVar(&f.opts.RedisRoles.PasswordInsecure, "redis-password-insecure", false, "--redis-password-file: send the password without TLS that verifies the Redis server (refused by default: anyone who can answer on a pod's address would read it)")
	fs.BoolVar(&f.opts.RedisRoles.PodSecrets, "redis-pod-secrets", false, "--redis-roles: read the Secret key a pod's REDIS_PASSWORD or REDIS_PASSWORD_FILE comes from (needs read access to those Secrets)")
	fs.BoolVar(&f.opts.RedisRoles.TLS, "redis-tls", false, "--redis-roles: talk TLS to Redis")
	fs.StringVar(&f.opts.RedisRoles.CAFile, "redis-tls-ca-file", "", "--redis-tls: PEM CA that signs the Redis servers' certificates (default: the system's roots)")
	fs.StringVar(&f.opts.RedisRoles.CertFile, "redis-tls-cert-file", "", "--redis-tls: PEM client certificate (Redis asks for one by default)")
	fs.StringVar(&f.opts.RedisRoles.KeyFile, "redis-tls-key-file", "", "--redis-tls: PEM private key of --redis-tls-cert-file")
	fs.StringVar(&f.opts.RedisRoles.ServerName, "redis-tls-server-name", "", "--redis-tls: name the Redis certificates are checked against (default: the pod IP)")
	fs.BoolVar(&f.opts.RedisRoles.SkipVerify, "redis-tls-insecure-skip-verify", false, "--redis-tls: do not verify the Redis servers' certificates")
	fs.StringVar(&f.opts.RedisRoles.Memory, "redis-roles-configmap", "regosched-redis-roles", "--redis-roles: ConfigMap in --leader-elect-namespace that keeps the last known role of each Redis pod across restarts, for pods recreated under the same name (\"\": keep it in memory only)")
	fs.DurationVar(&f.opts.AuditInterval, "audit-interval", audit.DefaultInterval, "how often the leader checks the bound pods against the hard rules (also at every Redis role change), reporting violations as regosched_violations and Warning Events (0: never)")
	fs.StringVar(&f.repair, "repair", string(repair.Off), "what the leader does of the audit's violations: off; plan (say each violation's repair by log, RepairPlanned Events and regosched_repairs_total, acting on nothing); on (repair one at a time: a graceful CLUSTER FAILOVER to an in-sync replica for two Redis Cluster masters on one node, an eviction of the replica beside its own master, an eviction covered by a PodDisruptionBudget otherwise)")
	fs.IntVar(&f.opts.Repair.MaxPerHour, "repair-max-per-hour", repair.DefaultMaxPerHour, "--repair=on: most repairs started in any hour, all clusters together, shared equally by the namespaces with violations")
	fs.DurationVar(&f.opts.Repair.Timeout, "repair-timeout", repair.DefaultTimeout, "--repair=on: how long a repair's violation may last before it is given up, reported (RepairFailed) and its cluster backed off")
	fs.DurationVar(&f.opts.Repair.Cooldown, "repair-cooldown", repair.DefaultCooldown, "--repair=on: no failover is sent to a cluster whose roles changed (by a failover of its own or one regosched sent) within this time")
	fs.Int64Var(&f.opts.Repair.MaxLagBytes, "repair-max-lag-bytes", repair.DefaultMaxLagBytes, "--repair=on: a replica takes over its shard only this close to its master's replication offset, in bytes")
	fs.StringVar(&f.opts.Repair.ConfigMap, "repair-configmap", repair.DefaultConfigMap, "--repair: ConfigMap in --leader-elect-namespace that keeps the repair in flight and the recent ones, for the next leader")
	fs.StringVar(&f.opts.CertRoll.Secret, "scheduler-client-secret", "", "Secret in --pod-namespace holding the scheduler's client certificate: when its ca.crt or tls.crt changes, the leader rolls --scheduler-deployment, since kube-scheduler reads that certificate only at start (with --scheduler-deployment; default: off)")
	fs.StringVar(&f.opts.CertRoll.Deployment, "scheduler-deployment", "", "--scheduler-client-secret: the scheduler's Deployment in --pod-namespace, rolled (annotation regosched.io/client-cert-sha256) when that Secret changes")
	fs.BoolVar(&f.opts.Profiling, "profiling", false, "serve Go pprof profiles under /debug/pprof/ on --listen")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	logLevels(cmd)
	enumFlag(cmd, "log-format", "text", "json")
	enumFlag(cmd, "soft-rules", "filter", "prioritize")
	enumFlag(cmd, "repair", string(repair.Off), string(repair.Plan), string(repair.On))
	enumFlag(cmd, "decision-log-mask-mode", string(decisionlog.MaskDrop), string(decisionlog.MaskReplace))
	return cmd
}

// options checks and converts the flags that do not land in opts
// directly, with a logger to stderr; a value that names no setting is a
// usage error.
func (f *serveFlags) options(stderr io.Writer) (serve.Options, *logrus.Logger, error) {
	opts := f.opts
	mode, err := repair.ParseMode(f.repair)
	if err != nil {
		return serve.Options{}, nil, &usageError{err}
	}
	opts.Repair.Mode = mode
	switch f.softRules {
	case "prioritize":
	case "filter":
		opts.SoftInFilter = true
	default:
		return serve.Options{}, nil, usageErrorf("--soft-rules: want prioritize or filter, got %q", f.softRules)
	}
	// serve checks these too, for callers of serve.Run; here they are usage
	// errors, as any value a flag does not take.
	switch dl := opts.DecisionLog; {
	case dl.MaskMode != string(decisionlog.MaskDrop) && dl.MaskMode != string(decisionlog.MaskReplace):
		return serve.Options{}, nil, usageErrorf("--decision-log-mask-mode: want %s or %s, got %q", decisionlog.MaskDrop, decisionlog.MaskReplace, dl.MaskMode)
	case dl.SampleRate < 0 || dl.SampleRate > 1:
		return serve.Options{}, nil, usageErrorf("--decision-log-sample: want a share between 0 and 1, got %v", dl.SampleRate)
	}
	logger, err := newLogger(stderr, f.logLevel)
	if err != nil {
		return serve.Options{}, nil, err
	}
	switch f.logFormat {
	case "json":
		logger.SetFormatter(&logrus.JSONFormatter{})
	case "text":
		logger.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	default:
		return serve.Options{}, nil, usageErrorf("--log-format: want text or json, got %q", f.logFormat)
	}
	opts.Log = logger
	opts.KubeAPIQPS = float32(f.qps)
	opts.BackgroundQPS = float32(f.backgroundQPS)
	if opts.Leader.Identity, err = os.Hostname(); err != nil {
		return serve.Options{}, nil, fmt.Errorf("leader identity: %w", err)
	}
	opts.Leader.Identity += "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return opts, logger, nil
}

// parseServe turns serve's flags into options (their Log is the logger),
// through the command the binary runs, touching no process-wide state, so
// that tests can read what a flag sets.
func parseServe(args []string) (serve.Options, error) {
	var opts serve.Options
	root := newRootCommand(func(_ context.Context, o serve.Options, _ *logrus.Logger) error {
		opts = o
		return nil
	})
	root.SetArgs(append([]string{"serve"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	if err := root.Execute(); err != nil {
		return serve.Options{}, err
	}
	return opts, nil
}

// runServe is `regosched serve`.
func runServe(ctx context.Context, opts serve.Options, logger *logrus.Logger) error {
	// One log stream: client-go's klog lines (informers, leader election)
	// and go-redis's (--redis-roles) go through logger, in its format and
	// filtered by its level. Both are process-global, set once here.
	logbridge.Klog(logger)
	logbridge.GoRedis(logger)
	return serve.Run(ctx, opts)
}

// inClusterNamespace is the pod's namespace when running in a cluster.
func inClusterNamespace() string {
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "regosched-system"
}
