// Package plugin is regosched as a kube-scheduler framework plugin: the
// same policy (internal/core/policy), claims join and placement cache
// (internal/core/placement) as the extender, called in process at PreFilter,
// Filter, Score and Reserve instead of over HTTP.
//
// Files are split by extension point, as in kube-scheduler's own plugins:
// prefilter.go (the pod's peers and conflicts, and the AddPod/RemovePod
// extensions that let default preemption see regosched's rules),
// filter.go, score.go (the soft rules), reserve.go (the placement
// cache learns a pod's node before its binding is seen) and shadow.go (a
// second policy judged beside the active one, never enforced).
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/ops/shadow"
	"github.com/regosched/regosched/internal/plumbing/logbridge"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "Regosched"

// Args are the plugin's arguments (pluginConfig[].args). The policy*
// fields are `regosched serve`'s --policy* flags, one to one, with the
// same defaults: a bundle directory, .tar.gz or bundle server URL, its data
// overlay, how it is watched or polled, and the checks every bundle passes
// (signature, tests, size) before it replaces the active one between two
// scheduling cycles.
type Args struct {
	Policy                   string `json:"policy,omitempty"`
	PolicyData               string `json:"policyData,omitempty"`
	PolicyPoll               string `json:"policyPoll,omitempty"`
	PolicyMinDelay           string `json:"policyMinDelay,omitempty"`
	PolicyMaxDelay           string `json:"policyMaxDelay,omitempty"`
	PolicyLongPollingTimeout string `json:"policyLongPollingTimeout,omitempty"`
	PolicyStartTimeout       string `json:"policyStartTimeout,omitempty"`
	PolicyBearerTokenFile    string `json:"policyBearerTokenFile,omitempty"`
	PolicyCACert             string `json:"policyCACert,omitempty"`
	PolicyInsecure           bool   `json:"policyInsecure,omitempty"`
	PolicyMaxBytes           int64  `json:"policyMaxBytes,omitempty"`
	PolicyMaxTotalBytes      int64  `json:"policyMaxTotalBytes,omitempty"`
	PolicyMaxEntries         int    `json:"policyMaxEntries,omitempty"`
	PolicyVerificationKey    string `json:"policyVerificationKey,omitempty"`
	PolicyVerificationKeyID  string `json:"policyVerificationKeyID,omitempty"`
	PolicySigningAlg         string `json:"policySigningAlg,omitempty"`
	PolicyScope              string `json:"policyScope,omitempty"`
	PolicyRunTests           bool   `json:"policyRunTests,omitempty"`
	// LogLevel is the most verbose of regosched's own entries passed to the
	// scheduler's log (logrus level names); info when empty.
	LogLevel string `json:"logLevel,omitempty"`
	// SyncTimeout bounds the wait for the placement cache's first list at
	// start-up; 2m when empty.
	SyncTimeout string `json:"syncTimeout,omitempty"`
	// ShadowPolicy is `regosched serve`'s --shadow-policy: a second bundle
	// (directory, .tar.gz or bundle server URL), loaded with the policy*
	// checks and reloads, judged beside the active one on every
	// scheduling cycle, off it, and never enforced (shadow.go). Empty
	// judges nothing twice.
	ShadowPolicy string `json:"shadowPolicy,omitempty"`
	// DecisionLog is `regosched serve`'s --decision-log* flags: each
	// scheduling cycle's filter, prioritize and bind decisions as OPA
	// decision log events (decisionlog.go). Unset or with no target, off.
	DecisionLog *DecisionLogArgs `json:"decisionLog,omitempty"`
}

// Regosched implements the framework's extension points over the judge.
type Regosched struct {
	judge    *judge.Judge
	policies Policies
	cache    *placement.Cache
	// snapshot is the scheduler's view of the pods on each node, which
	// settles a peer the cache places where the scheduler sees none.
	snapshot fwk.SharedLister
	log      logrus.FieldLogger
	// syncTimeout bounds the first cycles' wait for the placement cache,
	// fed by the scheduler's informers once the scheduler starts them.
	syncTimeout time.Duration
	// shadow judges the shadow policy (Args.ShadowPolicy); nil without.
	shadow shadow.Offerer
	// decisionLog takes the cycles' events (Args.DecisionLog); nil without.
	decisionLog *decisionlog.Logger
	// closeLog flushes and closes decisionLog, once, whoever asks first:
	// the framework's Close or the end of the plugin's context.
	closeLog func() error
}

// Policies gives the policy to judge with (implemented by bundles.Active).
type Policies interface {
	Load() *policy.Policy
}

var (
	_ fwk.PreFilterPlugin   = (*Regosched)(nil)
	_ fwk.FilterPlugin      = (*Regosched)(nil)
	_ fwk.PostFilterPlugin  = (*Regosched)(nil)
	_ fwk.PreScorePlugin    = (*Regosched)(nil)
	_ fwk.ScorePlugin       = (*Regosched)(nil)
	_ fwk.ReservePlugin     = (*Regosched)(nil)
	_ fwk.EnqueueExtensions = (*Regosched)(nil)
	_ fwk.SignPlugin        = (*Regosched)(nil)
	_ fwk.PostBindPlugin    = (*Regosched)(nil)
	_ io.Closer             = (*Regosched)(nil)
)

// Name returns the plugin's name.
func (*Regosched) Name() string { return Name }

// Factory returns the plugin's constructor for app.WithPlugin, with
// defaultPolicy (the embedded default bundle) for an empty Args.Policy and
// reg taking regosched's metrics (kube-scheduler's legacyregistry, so that
// they are on the scheduler's own /metrics).
func Factory(defaultPolicy fs.FS, reg prometheus.Registerer) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		if h == nil || h.ClientSet() == nil {
			return nil, errors.New("regosched plugin: the framework handle has no client")
		}
		args, err := decodeArgs(obj)
		if err != nil {
			return nil, err
		}
		level, err := logrus.ParseLevel(args.LogLevel)
		if err != nil {
			return nil, fmt.Errorf("%s args: logLevel: %w", Name, err)
		}
		log := logbridge.ToLogr(klog.FromContext(ctx).WithName(Name), level).WithField("plugin", Name)
		cfg, err := args.config(defaultPolicy, log)
		if err != nil {
			return nil, err
		}
		cfg.Client, cfg.Snapshot, cfg.Informers, cfg.Registerer = h.ClientSet(), h.SnapshotSharedLister(), h.SharedInformerFactory(), reg
		return New(ctx, cfg)
	}
}

// decodeArgs reads obj (nil when the configuration gives no args) with
// the defaults filled in. An unknown field is an error: a misspelt
// "policy" must not silently run the default policy.
func decodeArgs(obj runtime.Object) (Args, error) {
	var args Args
	switch obj := obj.(type) {
	case nil:
	case *runtime.Unknown: // what the scheduler hands an out-of-tree plugin
		if err := yaml.UnmarshalStrict(obj.Raw, &args); err != nil {
			return Args{}, fmt.Errorf("%s args: %w", Name, err)
		}
	default:
		if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
			return Args{}, fmt.Errorf("%s args: %w", Name, err)
		}
	}
	defaults := []struct {
		field *string
		value string
	}{
		{&args.LogLevel, "info"}, {&args.SyncTimeout, "2m"},
		// `regosched serve`'s flag defaults.
		{&args.PolicyPoll, "2s"}, {&args.PolicyMinDelay, "10s"}, {&args.PolicyMaxDelay, "20s"},
		{&args.PolicyLongPollingTimeout, "0s"}, {&args.PolicyStartTimeout, "30s"},
		{&args.PolicyVerificationKeyID, "default"}, {&args.PolicySigningAlg, "RS256"},
	}
	for _, d := range defaults {
		if *d.field == "" {
			*d.field = d.value
		}
	}
	return args, nil
}

// config turns args into the plugin's configuration, durations checked.
func (args Args) config(defaultPolicy fs.FS, log logrus.FieldLogger) (Config, error) {
	cfg := Config{Log: log, ShadowPolicy: args.ShadowPolicy, Bundles: bundles.Config{
		Path: args.Policy, Default: defaultPolicy, DataFile: args.PolicyData,
		VerificationKey: args.PolicyVerificationKey, VerificationKeyID: args.PolicyVerificationKeyID,
		SigningAlg: args.PolicySigningAlg, Scope: args.PolicyScope, RunTests: args.PolicyRunTests,
		BearerTokenFile: args.PolicyBearerTokenFile, CACertFile: args.PolicyCACert,
		MaxBytes: args.PolicyMaxBytes, MaxTotalBytes: args.PolicyMaxTotalBytes, MaxEntries: args.PolicyMaxEntries,
		Insecure: args.PolicyInsecure, Log: log.WithField("component", "policy"),
	}}
	durations := []struct {
		name     string
		value    string
		into     *time.Duration
		positive bool
	}{
		{"syncTimeout", args.SyncTimeout, &cfg.SyncTimeout, true},
		{"policyPoll", args.PolicyPoll, &cfg.Bundles.Poll, false},
		{"policyMinDelay", args.PolicyMinDelay, &cfg.Bundles.MinDelay, false},
		{"policyMaxDelay", args.PolicyMaxDelay, &cfg.Bundles.MaxDelay, false},
		{"policyLongPollingTimeout", args.PolicyLongPollingTimeout, &cfg.Bundles.LongPollingTimeout, false},
		{"policyStartTimeout", args.PolicyStartTimeout, &cfg.Bundles.StartTimeout, false},
	}
	for _, d := range durations {
		v, err := time.ParseDuration(d.value)
		if err != nil || v < 0 || (d.positive && v == 0) {
			return Config{}, fmt.Errorf("%s args: %s %q is not a %s duration", Name, d.name, d.value,
				map[bool]string{true: "positive", false: "non-negative"}[d.positive])
		}
		*d.into = v
	}
	// Last: it may open the log file, which an error above would leak.
	dl, err := args.DecisionLog.decisionLogConfig()
	if err != nil {
		return Config{}, err
	}
	cfg.DecisionLog = dl
	return cfg, nil
}

// Config is what the plugin is made of.
type Config struct {
	// Bundles is where the policy comes from, and the checks every bundle
	// passes before it replaces the active one.
	Bundles bundles.Config
	Client  kubernetes.Interface
	// Snapshot is the scheduler's (SnapshotSharedLister); nil skips the
	// cross-check of conflicting peers against it.
	Snapshot fwk.SharedLister
	// Informers is the scheduler's informer factory, which feeds the
	// placement cache: no second watch of pods and nodes. Nil gives the
	// cache informers of its own (tests).
	Informers informers.SharedInformerFactory
	// Registerer takes regosched's metrics; nil registers none.
	Registerer prometheus.Registerer
	// SyncTimeout bounds the wait for the placement cache's first list: at
	// New with informers of its own, else at the first scheduling cycles.
	SyncTimeout time.Duration
	// ShadowPolicy is a bundle judged beside the active one and never
	// enforced, opened with Bundles' checks; empty for none.
	ShadowPolicy string
	// DecisionLog configures the decision log; off when its Sink is nil.
	// New owns the Sink: it is closed when New fails or the plugin stops.
	// Registerer and Log are New's.
	DecisionLog decisionlog.Config
	Log         logrus.FieldLogger
}

// New builds the plugin: it opens the policy source, waits (at most
// cfg.SyncTimeout) for its placement cache's first list, since deciding
// before it would miss the peers already bound, and reloads the policy
// until ctx ends. A reload re-indexes the cache under the new policy and
// swaps both at once; a scheduling cycle keeps the policy it started with.
func New(ctx context.Context, cfg Config) (pl *Regosched, err error) {
	log := cfg.Log
	if sink := cfg.DecisionLog.Sink; sink != nil {
		defer func() {
			if err != nil && (pl == nil || pl.decisionLog == nil) {
				_ = sink.Close()
			}
		}()
	}
	src, err := bundles.Open(ctx, cfg.Bundles)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry() // registered nowhere: the metrics are dropped
	}
	active, err := bundles.NewActive(reg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (is the plugin enabled in two profiles?)", Name, err)
	}
	active.Store(src.First())
	log.WithFields(logrus.Fields{"source": src.Description(), "policyRevision": src.First().Revision()}).Info("policy loaded")
	c, err := newCache(cfg, active, log.WithField("component", "placement"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if err := c.RegisterMetrics(reg); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	j, err := judge.New(judge.Config{Placements: c, Policies: active, Client: cfg.Client, Registerer: reg, Log: log})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if cfg.Informers == nil {
		c.Start(ctx)
		syncCtx, cancel := context.WithTimeout(ctx, cfg.SyncTimeout)
		defer cancel()
		if !c.WaitForSync(syncCtx) {
			return nil, fmt.Errorf("%s: the placement cache did not sync within %s", Name, cfg.SyncTimeout)
		}
		log.WithFields(logrus.Fields{"pods": c.PodCount(), "nodes": c.NodeCount()}).Info("placement cache synced")
	}
	reindex := func(ctx context.Context, p *policy.Policy, store func()) {
		if err := c.SetKeyFunc(ctx, policy.Describer(func() *policy.Policy { return p }), store); err != nil {
			log.WithError(err).Warn("policy not activated")
		}
	}
	pl = &Regosched{judge: j, policies: active, cache: c, snapshot: cfg.Snapshot, log: log, syncTimeout: cfg.SyncTimeout}
	if cfg.ShadowPolicy != "" {
		b, err := shadow.Open(ctx, cfg.Bundles, cfg.ShadowPolicy, shadow.Config{
			NodeLabels: c.NodeLabels, Registerer: reg, Log: log.WithField("component", "shadow"),
		})
		if err != nil {
			return nil, fmt.Errorf("%s: shadowPolicy %s: %w", Name, cfg.ShadowPolicy, err)
		}
		go b.Run(ctx)
		pl.shadow = b.Shadow
		log.WithFields(logrus.Fields{"source": b.Source.Description(), "policyRevision": b.Source.First().Revision()}).
			Info("shadow policy loaded; judged beside the active one, never enforced")
	}
	if cfg.DecisionLog.Sink != nil {
		if err := pl.startDecisionLog(ctx, cfg.DecisionLog, reg, log.WithField("component", "decision-log")); err != nil {
			return nil, err
		}
		log.WithField("sample", cfg.DecisionLog.SampleRate).Info("decision log on")
	}
	if reload := src.Reloads(active, reindex); reload != nil {
		go reload(ctx)
	}
	return pl, nil
}

// newCache is the placement cache, fed from the scheduler's informers when
// cfg has them: the cluster's pods and nodes are then listed and watched
// once, by the scheduler, which starts them after every plugin is built.
func newCache(cfg Config, active *bundles.Active, log logrus.FieldLogger) (*placement.Cache, error) {
	describe := policy.Describer(active.Load)
	if cfg.Informers != nil {
		return placement.NewFromInformers(cfg.Informers.Core().V1().Pods().Informer(), cfg.Informers.Core().V1().Nodes().Informer(), describe, log)
	}
	return placement.New(cfg.Client, describe, log)
}
