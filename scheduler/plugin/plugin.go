// Package plugin is regosched as a kube-scheduler framework plugin: the
// same policy (internal/policy), claims join and placement cache
// (internal/placement) as the extender, called in process at PreFilter,
// Filter, Score and Reserve instead of over HTTP.
//
// Files are split by extension point, as in kube-scheduler's own plugins:
// prefilter.go (the pod's peers and conflicts, and the AddPod/RemovePod
// extensions that let default preemption see regosched's rules),
// filter.go, score.go (the soft rules) and reserve.go (the placement
// cache learns a pod's node before its binding is seen).
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/bundles"
	"github.com/regosched/regosched/internal/logbridge"
	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/policy"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "Regosched"

// Args are the plugin's arguments (pluginConfig[].args).
type Args struct {
	// Policy is a bundle directory or .tar.gz file; the embedded default
	// policy when empty.
	Policy string `json:"policy,omitempty"`
	// PolicyData is a JSON or YAML data overlay merged over the bundle's
	// data, as `regosched serve --policy-data`.
	PolicyData string `json:"policyData,omitempty"`
	// LogLevel is the most verbose of regosched's own entries passed to the
	// scheduler's log (logrus level names); info when empty.
	LogLevel string `json:"logLevel,omitempty"`
	// SyncTimeout bounds the wait for the placement cache's first list at
	// start-up; 2m when empty.
	SyncTimeout string `json:"syncTimeout,omitempty"`
}

// Regosched implements the framework's extension points.
type Regosched struct {
	policy *policy.Policy
	cache  *placement.Cache
	client kubernetes.Interface
	// snapshot is the scheduler's view of the pods on each node, which
	// settles a peer the cache places where the scheduler sees none.
	snapshot fwk.SharedLister
	log      logrus.FieldLogger
}

var (
	_ fwk.PreFilterPlugin   = (*Regosched)(nil)
	_ fwk.FilterPlugin      = (*Regosched)(nil)
	_ fwk.PreScorePlugin    = (*Regosched)(nil)
	_ fwk.ScorePlugin       = (*Regosched)(nil)
	_ fwk.ReservePlugin     = (*Regosched)(nil)
	_ fwk.EnqueueExtensions = (*Regosched)(nil)
	_ fwk.SignPlugin        = (*Regosched)(nil)
)

// Name returns the plugin's name.
func (*Regosched) Name() string { return Name }

// Factory returns the plugin's constructor for app.WithPlugin, with
// defaultPolicy (the embedded default bundle) for an empty Args.Policy.
func Factory(defaultPolicy fs.FS) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
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
		syncTimeout, err := time.ParseDuration(args.SyncTimeout)
		if err != nil || syncTimeout <= 0 {
			return nil, fmt.Errorf("%s args: syncTimeout %q is not a positive duration", Name, args.SyncTimeout)
		}
		log := logbridge.ToLogr(klog.FromContext(ctx).WithName(Name), level).WithField("plugin", Name)
		pol, source, err := bundles.Options{DataFile: args.PolicyData}.LoadLocal(ctx, args.Policy, defaultPolicy)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		log.WithFields(logrus.Fields{"source": source, "policyRevision": pol.Revision()}).Info("policy loaded")
		return New(ctx, h.ClientSet(), h.SnapshotSharedLister(), pol, log, syncTimeout)
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
	if args.LogLevel == "" {
		args.LogLevel = "info"
	}
	if args.SyncTimeout == "" {
		args.SyncTimeout = "2m"
	}
	return args, nil
}

// New builds the plugin over client's cluster with pol, and waits (at most
// syncTimeout) for its placement cache's first list: deciding before it
// would miss the peers already bound. The cache runs until ctx ends.
// snapshot is the scheduler's (SnapshotSharedLister); nil skips the
// cross-check of conflicting peers against it.
func New(ctx context.Context, client kubernetes.Interface, snapshot fwk.SharedLister, pol *policy.Policy, log logrus.FieldLogger, syncTimeout time.Duration) (*Regosched, error) {
	describe := policy.Describer(func() *policy.Policy { return pol })
	c, err := placement.New(client, describe, log.WithField("component", "placement"))
	if err != nil {
		return nil, fmt.Errorf("regosched plugin: %w", err)
	}
	c.Start(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !c.WaitForSync(syncCtx) {
		return nil, fmt.Errorf("regosched plugin: the placement cache did not sync within %s", syncTimeout)
	}
	log.WithFields(logrus.Fields{"pods": c.PodCount(), "nodes": c.NodeCount()}).Info("placement cache synced")
	return &Regosched{policy: pol, cache: c, client: client, snapshot: snapshot, log: log}, nil
}
