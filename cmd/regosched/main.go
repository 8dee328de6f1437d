// Command regosched is a kube-scheduler extender whose placement rules are
// written in Rego. This file only parses flags and wires; see internal/.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/apicontact"
	"github.com/regosched/regosched/internal/audit"
	"github.com/regosched/regosched/internal/bundles"
	"github.com/regosched/regosched/internal/extender"
	"github.com/regosched/regosched/internal/logbridge"
	"github.com/regosched/regosched/internal/repair"
	"github.com/regosched/regosched/internal/serve"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, errViolations) {
			os.Exit(1)
		}
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "regosched:", err)
		}
		os.Exit(2)
	}
}

const usage = `regosched: a kube-scheduler extender with placement rules in Rego.

Usage:
  regosched serve [flags]            serve the extender (see regosched serve -h)
  regosched explain -f POD [flags]   show what the policy decides for a pod on every node (see regosched explain -h)
  regosched audit [flags]            check the bound pods against the hard rules; exit 1 on any violation (see regosched audit -h)
  regosched version                  print the version
`

func run(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:])
	case "explain":
		return runExplain(args[1:])
	case "audit":
		return runAudit(args[1:])
	case "version":
		return json.NewEncoder(os.Stdout).Encode(map[string]string{"version": binaryVersion()})
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// parseServe turns serve's flags into options and a logger, touching no process-wide
// state, so that tests can read what a flag sets.
func parseServe(args []string) (serve.Options, *logrus.Logger, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	opts := serve.Options{Policy: bundles.Config{Default: regosched.DefaultPolicy()}, Version: binaryVersion()}
	fs.StringVar(&opts.Listen, "listen", ":8888", "address to serve the extender API, health and metrics on")
	fs.StringVar(&opts.HealthListen, "health-listen", "", "also serve /healthz, /readyz, /version and /metrics (never the verbs) over plain HTTP on this address, for probes without a client certificate (default: off)")
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)")
	fs.StringVar(&opts.Policy.Path, "policy", "", "OPA bundle directory, .tar.gz, or http(s) URL of a bundle on a bundle server (default: the embedded policy of rego/)")
	fs.DurationVar(&opts.Policy.Poll, "policy-poll", 2*time.Second, "how often a --policy directory or .tar.gz is checked for changes; a change is loaded once it has held still for one interval (0: never reload)")
	fs.StringVar(&opts.Policy.DataFile, "policy-data", "", "JSON object merged into the policy's data.regosched.config (objects merge key by key, null removes a key): change the default policy's workloads and label schemes without building a bundle; watched with --policy-poll; refused with --policy-verification-key")
	fs.DurationVar(&opts.Policy.MinDelay, "policy-min-delay", 10*time.Second, "http(s) --policy: shortest wait between polls (whole seconds)")
	fs.DurationVar(&opts.Policy.MaxDelay, "policy-max-delay", 20*time.Second, "http(s) --policy: longest wait between polls, and between retries after a failed download (whole seconds)")
	fs.DurationVar(&opts.Policy.LongPollingTimeout, "policy-long-polling-timeout", 0, "http(s) --policy: ask the server to hold each poll open until the bundle changes, at most this long, if it supports long polling (0: off)")
	fs.DurationVar(&opts.Policy.StartTimeout, "policy-start-timeout", 30*time.Second, "http(s) --policy: how long to retry an unreachable bundle server at start before exiting; regosched never serves without a policy")
	fs.StringVar(&opts.Policy.BearerTokenFile, "policy-bearer-token-file", "", "http(s) --policy: send the token in this file (read at every request) as Authorization: Bearer")
	fs.StringVar(&opts.Policy.CACertFile, "policy-ca-cert", "", "https --policy: PEM file of the CAs the bundle server's certificate must chain to (default: the system's roots)")
	fs.BoolVar(&opts.Policy.Insecure, "policy-insecure", false, "allow an http:// --policy with --policy-bearer-token-file or without --policy-verification-key (refused by default: anyone on the path could read the token or replace the unsigned bundle)")
	fs.Int64Var(&opts.Policy.MaxBytes, "policy-max-bytes", bundles.DefaultBundleSizeLimit, "largest file a policy bundle may hold, and largest bundle download, in bytes; bigger ones are refused before they are read into memory")
	fs.Int64Var(&opts.Policy.MaxTotalBytes, "policy-max-total-bytes", bundles.DefaultBundleTotalLimit, "largest sum of a policy bundle's files, decompressed, in bytes; checked while the bundle streams, before it is held in memory (a bundle's parsed data takes about 20 times its size)")
	fs.IntVar(&opts.Policy.MaxEntries, "policy-max-entries", bundles.DefaultBundleMaxEntries, "most files and directories a policy bundle may hold")
	fs.StringVar(&opts.Policy.VerificationKey, "policy-verification-key", "", "require signed bundles: PEM file of the public key (RSA, ECDSA), or the secret for HS256/384/512; unsigned or tampered bundles are refused")
	fs.StringVar(&opts.Policy.VerificationKeyID, "policy-verification-key-id", "default", "key id of --policy-verification-key (the keyid the bundle was signed with)")
	fs.StringVar(&opts.Policy.SigningAlg, "policy-signing-alg", "RS256", "signature algorithm of --policy-verification-key")
	fs.StringVar(&opts.Policy.Scope, "policy-scope", "", "scope the bundle signature must carry (default: none)")
	fs.BoolVar(&opts.Policy.RunTests, "policy-run-tests", false, "run each bundle's own *_test.rego tests before activating it; a failing test refuses the bundle")
	fs.StringVar(&opts.URLPrefix, "url-prefix", "/scheduler", "path prefix of the extender verbs, as in the scheduler's urlPrefix")
	fs.Int64Var(&opts.MaxBodyBytes, "max-request-bytes", extender.DefaultMaxBodyBytes, "largest request body accepted (413 above)")
	fs.IntVar(&opts.MaxConcurrent, "max-concurrent-requests", extender.DefaultMaxConcurrent, "verb requests served at once; more wait for a slot, so a flood cannot hold every body in memory")
	fs.DurationVar(&opts.InFlightTTL, "inflight-ttl", 2*time.Second, "how long a pod that passed filter holds its peers back while its binding is not seen")
	fs.BoolVar(&opts.Verbs, "verbs", true, "serve the scheduler extender verbs (filter, prioritize, preempt, bind); false runs regosched beside regosched-scheduler for Redis roles, the audit and the repair")
	fs.StringVar(&opts.SchedulerName, "scheduler-name", "regosched", "schedulerName of the profile that calls regosched: only its pods are reserved and bound, and its pending pods are described by the policy as soon as they are created, off the scheduling cycle (required with --verbs)")
	softRules := fs.String("soft-rules", "filter", "where the soft rules act: filter (filter keeps only the candidates of the lowest penalty and reports the others as unresolvable; the scheduler's extender entry needs no prioritizeVerb, one round trip less per pod) or prioritize (scores; the entry must have prioritizeVerb, or the soft rules act nowhere); see docs/policies.md")
	fs.DurationVar(&opts.InFlightWait, "inflight-wait", 2*time.Second, "longest a filter call waits for in-flight peers (keep well under the scheduler's httpTimeout); 0 turns in-flight tracking off")
	fs.StringVar(&opts.TLS.CertFile, "tls-cert-file", "", "serve HTTPS with this PEM certificate (reloaded when it changes)")
	fs.StringVar(&opts.TLS.KeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&opts.TLS.ClientCAFile, "client-ca-file", "", "require client certificates signed by a CA in this PEM file (reloaded when it changes)")
	fs.Func("tls-allowed-client-names", "--client-ca-file: comma-separated names (subject CN, DNS or URI SAN) of the only client certificates accepted, such as the scheduler's; others signed by the same CA are refused at the handshake (default: any the CA signed)", func(v string) error {
		opts.TLS.AllowedClientNames = commaList(v)
		return nil
	})
	qps := fs.Float64("kube-api-qps", 100, "queries per second to the API server (binds, reads)")
	fs.IntVar(&opts.KubeAPIBurst, "kube-api-burst", 200, "burst of queries to the API server")
	backgroundQPS := fs.Float64("kube-api-background-qps", 20, "queries per second for the writes that are not binds (audit Events, Redis role labels and their ConfigMap), on a client of their own so that they never delay a bind")
	fs.IntVar(&opts.BackgroundBurst, "kube-api-background-burst", 40, "burst of --kube-api-background-qps")
	fs.BoolVar(&opts.LeaderElect, "leader-elect", false, "elect one leader among replicas through a Lease: every synced replica is ready, only the leader answers the verbs and labels its pod regosched.io/leader=true for the Service to select")
	fs.StringVar(&opts.Leader.PodName, "pod-name", os.Getenv("POD_NAME"), "--leader-elect: this replica's own pod, which carries the leader label while it leads (default $POD_NAME; empty: no label)")
	fs.StringVar(&opts.Leader.PodNamespace, "pod-namespace", inClusterNamespace(), "--leader-elect: namespace of --pod-name")
	fs.DurationVar(&opts.APILostAfter, "api-lost-after", apicontact.DefaultThreshold, "readiness turns false once the API server has not answered for this long: decisions would rest on a stale cache")
	fs.StringVar(&opts.Leader.Namespace, "leader-elect-namespace", inClusterNamespace(), "namespace of the leader Lease")
	fs.StringVar(&opts.Leader.Name, "leader-elect-name", "regosched", "name of the leader Lease")
	fs.BoolVar(&opts.RedisRoles.On, "redis-roles", false, "read the role (and, in cluster mode, the shard) of every pod the policy reads roles live for from Redis itself (ROLE, CLUSTER NODES) and write it onto the pod as labels regosched.io/role and regosched.io/shard")
	fs.DurationVar(&opts.RedisRoles.Interval, "redis-roles-interval", 10*time.Second, "--redis-roles: how often every Redis pod is asked again (pod events also trigger a check)")
	fs.StringVar(&opts.RedisRoles.PasswordFile, "redis-password-file", "", "--redis-roles: file holding the password of every Redis (default: the pod's own REDIS_PASSWORD, else none)")
	fs.Func("redis-password-namespaces", "--redis-password-file: comma-separated namespaces whose Redis pods are sent that password (required with it); pods elsewhere use their own REDIS_PASSWORD", func(v string) error {
		opts.RedisRoles.PasswordNamespaces = commaList(v)
		return nil
	})
	fs.BoolVar(&opts.RedisRoles.PasswordInsecure, "redis-password-insecure", false, "--redis-password-file: send the password without TLS that verifies the Redis server (refused by default: anyone who can answer on a pod's address would read it)")
	fs.BoolVar(&opts.RedisRoles.PodSecrets, "redis-pod-secrets", false, "--redis-roles: read the Secret key a pod's REDIS_PASSWORD or REDIS_PASSWORD_FILE comes from (needs read access to those Secrets)")
	fs.BoolVar(&opts.RedisRoles.TLS, "redis-tls", false, "--redis-roles: talk TLS to Redis")
	fs.StringVar(&opts.RedisRoles.CAFile, "redis-tls-ca-file", "", "--redis-tls: PEM CA that signs the Redis servers' certificates (default: the system's roots)")
	fs.StringVar(&opts.RedisRoles.CertFile, "redis-tls-cert-file", "", "--redis-tls: PEM client certificate (Redis asks for one by default)")
	fs.StringVar(&opts.RedisRoles.KeyFile, "redis-tls-key-file", "", "--redis-tls: PEM private key of --redis-tls-cert-file")
	fs.StringVar(&opts.RedisRoles.ServerName, "redis-tls-server-name", "", "--redis-tls: name the Redis certificates are checked against (default: the pod IP)")
	fs.BoolVar(&opts.RedisRoles.SkipVerify, "redis-tls-insecure-skip-verify", false, "--redis-tls: do not verify the Redis servers' certificates")
	fs.StringVar(&opts.RedisRoles.Memory, "redis-roles-configmap", "regosched-redis-roles", "--redis-roles: ConfigMap in --leader-elect-namespace that keeps the last known role of each Redis pod across restarts, for pods recreated under the same name (\"\": keep it in memory only)")
	fs.DurationVar(&opts.AuditInterval, "audit-interval", audit.DefaultInterval, "how often the leader checks the bound pods against the hard rules (also at every Redis role change), reporting violations as regosched_violations and Warning Events (0: never)")
	repairMode := fs.String("repair", string(repair.Off), "what the leader does of the audit's violations: off; plan (say each violation's repair by log, RepairPlanned Events and regosched_repairs_total, acting on nothing); on (repair one at a time: a graceful CLUSTER FAILOVER to an in-sync replica for two Redis Cluster masters on one node, an eviction of the replica beside its own master, an eviction covered by a PodDisruptionBudget otherwise)")
	fs.IntVar(&opts.Repair.MaxPerHour, "repair-max-per-hour", repair.DefaultMaxPerHour, "--repair=on: most repairs started in any hour, all clusters together")
	fs.DurationVar(&opts.Repair.Timeout, "repair-timeout", repair.DefaultTimeout, "--repair=on: how long a repair's violation may last before it is given up, reported (RepairFailed) and its cluster backed off")
	fs.DurationVar(&opts.Repair.Cooldown, "repair-cooldown", repair.DefaultCooldown, "--repair=on: no failover is sent to a cluster whose roles changed (by a failover of its own or one regosched sent) within this time")
	fs.Int64Var(&opts.Repair.MaxLagBytes, "repair-max-lag-bytes", repair.DefaultMaxLagBytes, "--repair=on: a replica takes over its shard only this close to its master's replication offset, in bytes")
	fs.StringVar(&opts.Repair.ConfigMap, "repair-configmap", repair.DefaultConfigMap, "--repair: ConfigMap in --leader-elect-namespace that keeps the repair in flight and the recent ones, for the next leader")
	fs.BoolVar(&opts.Profiling, "profiling", false, "serve Go pprof profiles under /debug/pprof/ on --listen")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	format := fs.String("log-format", "text", "log format: text or json")
	if err := fs.Parse(args); err != nil {
		return serve.Options{}, nil, err
	}
	mode, err := repair.ParseMode(*repairMode)
	if err != nil {
		return serve.Options{}, nil, err
	}
	opts.Repair.Mode = mode
	if fs.NArg() > 0 {
		return serve.Options{}, nil, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	switch *softRules {
	case "prioritize":
	case "filter":
		opts.SoftInFilter = true
	default:
		return serve.Options{}, nil, fmt.Errorf("--soft-rules: want prioritize or filter, got %q", *softRules)
	}

	logger := logrus.New()
	lvl, err := logrus.ParseLevel(*level)
	if err != nil {
		return serve.Options{}, nil, fmt.Errorf("--log-level: %w", err)
	}
	logger.SetLevel(lvl)
	switch *format {
	case "json":
		logger.SetFormatter(&logrus.JSONFormatter{})
	case "text":
		logger.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	default:
		return serve.Options{}, nil, fmt.Errorf("--log-format: want text or json, got %q", *format)
	}
	opts.Log = logger
	opts.KubeAPIQPS = float32(*qps)
	opts.BackgroundQPS = float32(*backgroundQPS)
	if opts.Leader.Identity, err = os.Hostname(); err != nil {
		return serve.Options{}, nil, fmt.Errorf("leader identity: %w", err)
	}
	opts.Leader.Identity += "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return opts, logger, nil
}

func runServe(args []string) error {
	opts, logger, err := parseServe(args)
	if err != nil {
		return err
	}
	// One log stream: client-go's klog lines (informers, leader election)
	// and go-redis's (--redis-roles) go through logger, in its format and
	// filtered by its level. Both are process-global, set once here.
	logbridge.Klog(logger)
	logbridge.GoRedis(logger)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serve.Run(ctx, opts)
}

// commaList splits a comma-separated flag value, dropping empty items.
func commaList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// inClusterNamespace is the pod's namespace when running in a cluster.
func inClusterNamespace() string {
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "regosched-system"
}

func binaryVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
