package plugin

import (
	"fmt"
	"io/fs"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/frontend/settings"
	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// Args are the plugin's arguments (pluginConfig[].args). The policy*
// fields are `regosched serve`'s --policy* flags, one to one, with the
// same defaults (both named in internal/frontend/settings): a bundle
// directory, .tar.gz or bundle server URL, its data overlay, how it is
// watched or polled, and the checks every bundle passes (signature, tests,
// size) before it replaces the active one between two scheduling cycles.
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

// DecisionLogArgs are the plugin arg decisionLog: `regosched serve`'s
// --decision-log* flags, one to one, with the same defaults.
type DecisionLogArgs struct {
	// Target is "stdout", a file path (appended to), or the http(s):// URL
	// of an OPA decision log service; empty turns the decision log off.
	Target string `json:"target,omitempty"`
	// Sample is the share of decisions logged, 0..1; 1 when unset.
	Sample *float64 `json:"sample,omitempty"`
	// MaskLabels are pod label keys kept out of the events, as MaskMode
	// says: drop (the default) or replace.
	MaskLabels []string `json:"maskLabels,omitempty"`
	MaskMode   string   `json:"maskMode,omitempty"`
	// BufferSize bounds the events waiting for the sink (10000 when unset).
	BufferSize int `json:"bufferSize,omitempty"`
	// FlushInterval is how often the buffer is sent (5s when unset).
	FlushInterval string `json:"flushInterval,omitempty"`
	// HTTP targets only: the timeout of each upload (10s), the retries of
	// a failed upload (5 when unset; 0 none), the largest upload in bytes
	// (32768), the CAs of an https service, a bearer token file, and
	// Insecure to send that token over plain http.
	Timeout          string `json:"timeout,omitempty"`
	MaxRetries       *int   `json:"maxRetries,omitempty"`
	UploadLimitBytes int    `json:"uploadLimitBytes,omitempty"`
	CACert           string `json:"caCert,omitempty"`
	BearerTokenFile  string `json:"bearerTokenFile,omitempty"`
	Insecure         bool   `json:"insecure,omitempty"`
}

// decodeArgs reads obj (nil when the configuration gives no args) with
// the plugin's own defaults filled in; the policy's are settings', taken
// by config. An unknown field is an error: a misspelt "policy" must not
// silently run the default policy.
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

// config turns args into the plugin's configuration, over the settings'
// defaults, durations checked.
func (args Args) config(defaultPolicy fs.FS, log logrus.FieldLogger) (Config, error) {
	cfg := Config{Log: log, ShadowPolicy: args.ShadowPolicy, Bundles: settings.DefaultPolicy()}
	b := &cfg.Bundles
	b.Default = defaultPolicy
	given(&b.Path, args.Policy)
	given(&b.DataFile, args.PolicyData)
	given(&b.BearerTokenFile, args.PolicyBearerTokenFile)
	given(&b.CACertFile, args.PolicyCACert)
	given(&b.Insecure, args.PolicyInsecure)
	given(&b.MaxBytes, args.PolicyMaxBytes)
	given(&b.MaxTotalBytes, args.PolicyMaxTotalBytes)
	given(&b.MaxEntries, args.PolicyMaxEntries)
	given(&b.VerificationKey, args.PolicyVerificationKey)
	given(&b.VerificationKeyID, args.PolicyVerificationKeyID)
	given(&b.SigningAlg, args.PolicySigningAlg)
	given(&b.Scope, args.PolicyScope)
	given(&b.RunTests, args.PolicyRunTests)
	durations := []struct {
		name     string
		value    string
		into     *time.Duration
		positive bool
	}{
		{"syncTimeout", args.SyncTimeout, &cfg.SyncTimeout, true},
		{"policyPoll", args.PolicyPoll, &b.Poll, false},
		{"policyMinDelay", args.PolicyMinDelay, &b.MinDelay, false},
		{"policyMaxDelay", args.PolicyMaxDelay, &b.MaxDelay, false},
		{"policyLongPollingTimeout", args.PolicyLongPollingTimeout, &b.LongPollingTimeout, false},
		{"policyStartTimeout", args.PolicyStartTimeout, &b.StartTimeout, false},
	}
	for _, d := range durations {
		if d.value == "" {
			continue // the setting's default
		}
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

// given sets *into to v unless v is its type's zero value: an arg left
// out keeps the setting's default, as a flag left out does.
func given[T comparable](into *T, v T) {
	var zero T
	if v != zero {
		*into = v
	}
}

// decisionLogConfig checks a and opens its sink, as serve checks and
// opens its --decision-log* flags (decisionlog.Settings): a
// decisionlog.Config with the settings, its Sink nil when a is off. Errors
// name the arg.
func (a *DecisionLogArgs) decisionLogConfig() (decisionlog.Config, error) {
	if a == nil || a.Target == "" {
		return decisionlog.Config{}, nil
	}
	name := func(setting string) string { return "decisionLog." + setting }
	set, err := a.settings(name)
	if err != nil {
		return decisionlog.Config{}, fmt.Errorf("%s args: %w", Name, err)
	}
	cfg, err := set.Config(name)
	if err != nil {
		return decisionlog.Config{}, fmt.Errorf("%s args: %w", Name, err)
	}
	return cfg, nil
}

// settings are a's decision log settings. The sample and the retries, whose
// zero is a value, take the settings' defaults when unset; the others
// stay zero, which decisionlog reads as the same defaults.
func (a *DecisionLogArgs) settings(name decisionlog.Names) (decisionlog.Settings, error) {
	def := settings.DefaultDecisionLog()
	set := decisionlog.Settings{
		Target: a.Target, SampleRate: def.SampleRate, MaskLabels: a.MaskLabels, MaskMode: a.MaskMode,
		BufferEvents: a.BufferSize, UploadLimitBytes: a.UploadLimitBytes, MaxRetries: def.MaxRetries,
		CACertFile: a.CACert, BearerTokenFile: a.BearerTokenFile, Insecure: a.Insecure,
	}
	if a.Sample != nil {
		set.SampleRate = *a.Sample
	}
	if a.MaxRetries != nil {
		set.MaxRetries = *a.MaxRetries
	}
	var err error
	if set.FlushInterval, err = positiveDuration(a.FlushInterval); err != nil {
		return decisionlog.Settings{}, fmt.Errorf("%s: %w", name(decisionlog.SettingFlushInterval), err)
	}
	if set.Timeout, err = positiveDuration(a.Timeout); err != nil {
		return decisionlog.Settings{}, fmt.Errorf("%s: %w", name(decisionlog.SettingTimeout), err)
	}
	return set, nil
}

// positiveDuration parses s; empty is 0, the setting's default.
func positiveDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", s)
	}
	return d, nil
}
