// Package plugin is regosched as a kube-scheduler framework plugin: the
// same policy (internal/core/policy), claims join and placement cache
// (internal/core/placement) as the extender, called in process at PreFilter,
// Filter, Score and Reserve instead of over HTTP.
//
// New opens the policy, the placement cache, the shadow policy and the
// decision log as `regosched serve` does (internal/frontend/assembly);
// args.go reads the args, named and defaulted as serve's flags are
// (internal/frontend/settings). The other files are split by extension
// point, as in kube-scheduler's own plugins: prefilter.go (the pod's peers and conflicts, and the AddPod/RemovePod
// extensions that let default preemption see regosched's rules),
// filter.go, score.go (the soft rules), reserve.go (the placement
// cache learns a pod's node before its binding is seen), preemption.go
// (PostFilter's default preemption, which never evicts a protected pod) and
// shadow.go (a second policy judged beside the active one, never enforced).
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/clock"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/frontend/assembly"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/ops/shadow"
	"github.com/regosched/regosched/internal/plumbing/logbridge"
	"github.com/regosched/regosched/internal/plumbing/version"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "Regosched"

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
	// preemption is PostFilter's default preemption (preemption.go); nil
	// without a framework handle (tests).
	preemption *preemption
}

// Policies gives the policy to judge with (implemented by bundles.Active).
type Policies interface {
	Load() *policy.Policy
}

var (
	_ fwk.PreEnqueuePlugin  = (*Regosched)(nil)
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
		cfg.Recorder = h.EventRecorder()
		cfg.Handle, cfg.Features = h, feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
		return New(ctx, cfg)
	}
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
	// Recorder, if set, takes the Events of the pods for which the rules
	// per zone yield (the scheduler's recorder).
	Recorder events.EventRecorder
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
	// Handle, if set, is the framework's: PostFilter then runs default
	// preemption, with Features (the scheduler's feature gates), never
	// evicting a pod the policy protects. Nil: PostFilter preempts nothing.
	Handle   fwk.Handle
	Features feature.Features
	// Clock, if set, replaces the placement cache's (tests of expiry).
	Clock clock.WithTicker
}

// New builds the plugin: it opens the policy source, the placement cache,
// the shadow policy and the decision log as `regosched serve` does
// (assembly.Open), waits (at most cfg.SyncTimeout) for its placement
// cache's first list, since deciding before it would miss the peers
// already bound, and reloads the policy until ctx ends. A reload
// re-indexes the cache under the new policy and swaps both at once; a
// scheduling cycle keeps the policy it started with.
func New(ctx context.Context, cfg Config) (pl *Regosched, err error) {
	log := cfg.Log
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry() // registered nowhere: the metrics are dropped
	}
	parts, err := assembly.Open(ctx, assembly.Config{
		Policy: cfg.Bundles,
		NewCache: func(keys placement.KeyFunc) (*placement.Cache, error) {
			return newCache(cfg, keys, log.WithField("component", "placement"))
		},
		ShadowPolicy: cfg.ShadowPolicy,
		DecisionLog:  withIdentity(cfg.DecisionLog),
		Names:        assembly.Names{ShadowPolicy: "shadowPolicy", DecisionLog: "decisionLog"},
		Registerer:   reg,
		Log:          log,
	})
	if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil, fmt.Errorf("%s: %w (is the plugin enabled in two profiles?)", Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	defer func() {
		if err != nil {
			_ = parts.Close()
		}
	}()
	log.WithFields(logrus.Fields{"source": parts.Source.Description(), "policyRevision": parts.Source.First().Revision()}).Info("policy loaded")
	c := parts.Cache
	j, err := judge.New(judge.Config{Placements: c, Policies: parts.Active, Client: cfg.Client, Recorder: cfg.Recorder, Registerer: reg, Log: log})
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
	pl = &Regosched{judge: j, policies: parts.Active, cache: c, snapshot: cfg.Snapshot, log: log, syncTimeout: cfg.SyncTimeout}
	if cfg.Handle != nil {
		if pl.preemption, err = newPreemption(ctx, cfg.Handle, cfg.Features, parts.Active, log.WithField("component", "preemption")); err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
	}
	if b := parts.Shadow; b != nil { // not a typed nil in the interface
		pl.shadow = b.Shadow
		log.WithFields(logrus.Fields{"source": b.Source.Description(), "policyRevision": b.Source.First().Revision()}).
			Info("shadow policy loaded; judged beside the active one, never enforced")
	}
	if parts.DecisionLog != nil {
		pl.decisionLog = parts.DecisionLog
		pl.closeLog = sync.OnceValue(func() error {
			if err := parts.Close(); err != nil {
				return fmt.Errorf("%s: %w", Name, err)
			}
			return nil
		})
		go func() {
			<-ctx.Done()
			if err := pl.closeLog(); err != nil {
				log.WithError(err).Warn("decision log events lost at shutdown")
			}
		}()
		log.WithField("sample", cfg.DecisionLog.SampleRate).Info("decision log on")
	}
	go parts.Run(ctx)
	return pl, nil
}

// withIdentity is cfg with who logs, unless cfg says: the pod's name in a
// cluster, so that two replicas' events stay apart, and this release.
func withIdentity(cfg decisionlog.Config) decisionlog.Config {
	if cfg.Sink == nil {
		return cfg
	}
	if cfg.InstanceID == "" {
		if cfg.InstanceID, _ = os.Hostname(); cfg.InstanceID == "" {
			cfg.InstanceID = "regosched-scheduler"
		}
	}
	if cfg.Version == "" {
		cfg.Version = version.Get().Version
	}
	return cfg
}

// Close flushes and closes the decision log: the framework calls it when
// the scheduler stops (plugins that are io.Closers are closed).
func (pl *Regosched) Close() error {
	if pl.closeLog == nil {
		return nil
	}
	return pl.closeLog()
}

// newCache is the placement cache, fed from the scheduler's informers when
// cfg has them: the cluster's pods and nodes are then listed and watched
// once, by the scheduler, which starts them after every plugin is built.
func newCache(cfg Config, describe placement.KeyFunc, log logrus.FieldLogger) (*placement.Cache, error) {
	var opts []placement.Option
	if cfg.Clock != nil {
		opts = append(opts, placement.WithClock(cfg.Clock))
	}
	if cfg.Informers != nil {
		opts = append(opts, placement.WithStatefulSets(cfg.Informers.Apps().V1().StatefulSets().Informer()))
		return placement.NewFromInformers(cfg.Informers.Core().V1().Pods().Informer(), cfg.Informers.Core().V1().Nodes().Informer(), describe, log, opts...)
	}
	return placement.New(cfg.Client, describe, log, opts...)
}
