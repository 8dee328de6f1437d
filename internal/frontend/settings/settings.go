// Package settings names, once, the settings both builds take: the
// policy's (bundles.Config), the shadow policy's and the decision log's
// (decisionlog.Settings). Each is listed with `regosched serve`'s flag,
// the regosched-scheduler plugin's arg, its default and its help, so that
// serve's flags are made from the lists and the plugin's args are checked
// against them: a name or a default cannot differ between the builds.
package settings

import (
	"time"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// Setting is one setting as an operator writes it to either build.
type Setting struct {
	// Flag is serve's flag, without the dashes.
	Flag string
	// Arg is the plugin's arg, as its JSON names it (the decision log's
	// within the arg decisionLog).
	Arg string
	// Value points at the field the setting fills: a *string, *bool,
	// *int, *int64, *float64, *time.Duration or *[]string.
	Value any
	// Default is the value when the operator gives none, of the type
	// Value points at.
	Default any
	Usage   string
	// reset sets Value to Default.
	reset func()
}

// of is the setting of the field into, whose default is def; the type
// parameter keeps Default of the type Value points at.
func of[T any](flag, arg string, into *T, def T, usage string) Setting {
	return Setting{Flag: flag, Arg: arg, Value: into, Default: def, Usage: usage, reset: func() { *into = def }}
}

// FlagOf names the setting of list whose arg is arg by its flag, dashes
// and all, for errors ("" for none): serve's decisionlog.Names.
func FlagOf(list []Setting, arg string) string {
	for _, s := range list {
		if s.Arg == arg {
			return "--" + s.Flag
		}
	}
	return ""
}

// defaults sets every setting of list to its default.
func defaults(list []Setting) {
	for _, s := range list {
		s.reset()
	}
}

// DefaultPolicy is the policy configuration of an operator who sets
// nothing: the embedded policy (its Default left to the caller), polled
// and checked as the flags' and args' defaults say.
func DefaultPolicy() bundles.Config {
	var c bundles.Config
	defaults(Policy(&c))
	return c
}

// DefaultDecisionLog is the decision log of an operator who sets nothing
// but its target.
func DefaultDecisionLog() decisionlog.Settings {
	var s decisionlog.Settings
	defaults(DecisionLog(&s))
	return s
}

// Policy lists c's settings: where the policy comes from, how it is
// watched or polled, and the checks every bundle passes.
func Policy(c *bundles.Config) []Setting {
	return []Setting{
		of("policy", "policy", &c.Path, "", "OPA bundle directory, .tar.gz, or http(s) URL of a bundle on a bundle server (default: the embedded policy of rego/)"),
		of("policy-poll", "policyPoll", &c.Poll, 2*time.Second, "how often a --policy directory or .tar.gz is checked for changes; a change is loaded once it has held still for one interval (0: never reload)"),
		of("policy-data", "policyData", &c.DataFile, "", "JSON object merged into the policy's data.regosched.config (objects merge key by key, null removes a key): change the default policy's workloads and label schemes without building a bundle; watched with --policy-poll; refused with --policy-verification-key"),
		of("policy-min-delay", "policyMinDelay", &c.MinDelay, 10*time.Second, "http(s) --policy: shortest wait between polls (whole seconds)"),
		of("policy-max-delay", "policyMaxDelay", &c.MaxDelay, 20*time.Second, "http(s) --policy: longest wait between polls, and between retries after a failed download (whole seconds)"),
		of("policy-long-polling-timeout", "policyLongPollingTimeout", &c.LongPollingTimeout, 0, "http(s) --policy: ask the server to hold each poll open until the bundle changes, at most this long, if it supports long polling (0: off)"),
		of("policy-start-timeout", "policyStartTimeout", &c.StartTimeout, 30*time.Second, "http(s) --policy: how long to retry an unreachable bundle server at start before exiting; regosched never serves without a policy"),
		of("policy-bearer-token-file", "policyBearerTokenFile", &c.BearerTokenFile, "", "http(s) --policy: send the token in this file (read at every request) as Authorization: Bearer"),
		of("policy-ca-cert", "policyCACert", &c.CACertFile, "", "https --policy: PEM file of the CAs the bundle server's certificate must chain to (default: the system's roots)"),
		of("policy-insecure", "policyInsecure", &c.Insecure, false, "allow an http:// --policy with --policy-bearer-token-file or without --policy-verification-key (refused by default: anyone on the path could read the token or replace the unsigned bundle)"),
		of("policy-max-bytes", "policyMaxBytes", &c.MaxBytes, bundles.DefaultBundleSizeLimit, "largest file a policy bundle may hold, and largest bundle download, in bytes; bigger ones are refused before they are read into memory"),
		of("policy-max-total-bytes", "policyMaxTotalBytes", &c.MaxTotalBytes, bundles.DefaultBundleTotalLimit, "largest sum of a policy bundle's files, decompressed, in bytes; checked while the bundle streams, before it is held in memory (a bundle's parsed data takes about 20 times its size)"),
		of("policy-max-entries", "policyMaxEntries", &c.MaxEntries, bundles.DefaultBundleMaxEntries, "most files and directories a policy bundle may hold"),
		of("policy-verification-key", "policyVerificationKey", &c.VerificationKey, "", "require signed bundles: PEM file of the public key (RSA, ECDSA), or the secret for HS256/384/512; unsigned or tampered bundles are refused"),
		of("policy-verification-key-id", "policyVerificationKeyID", &c.VerificationKeyID, "default", "key id of --policy-verification-key (the keyid the bundle was signed with)"),
		of("policy-signing-alg", "policySigningAlg", &c.SigningAlg, "RS256", "signature algorithm of --policy-verification-key"),
		of("policy-scope", "policyScope", &c.Scope, "", "scope the bundle signature must carry (default: none)"),
		of("policy-run-tests", "policyRunTests", &c.RunTests, false, "run each bundle's own *_test.rego tests before activating it; a failing test refuses the bundle"),
	}
}

// ShadowPolicy is the setting of the shadow policy's bundle, path; empty
// judges nothing twice.
func ShadowPolicy(path *string) Setting {
	return of("shadow-policy", "shadowPolicy", path, "", "a second OPA bundle (directory, .tar.gz or http(s) URL), loaded with the --policy-* checks and reloads, judged beside the active policy on every filter call off the request and never enforced: disagreements are counted (regosched_shadow_disagreements_total) and logged, sampled (default: off)")
}

// DecisionLog lists s's settings; their args are decisionlog's Setting
// names, which its errors give.
func DecisionLog(s *decisionlog.Settings) []Setting {
	return []Setting{
		of("decision-log", decisionlog.SettingTarget, &s.Target, "", "log every filter, prioritize, preempt and bind decision as an OPA decision log event (pod, policy revision, nodes denied with rule and peer, outcome): stdout, a file path (appended to), or the http(s):// URL of a service speaking OPA's decision log API (gzip'd JSON arrays POSTed to URL/logs); events are buffered and sent off the verbs, and dropped (regosched_decision_logs_dropped_total) rather than wait; see docs/decision-logs.md (default: off)"),
		of("decision-log-sample", decisionlog.SettingSample, &s.SampleRate, 1, "--decision-log: share of decisions logged, 0..1"),
		of("decision-log-mask-labels", decisionlog.SettingMaskLabels, &s.MaskLabels, nil, "--decision-log: comma-separated pod label keys kept out of the events (see --decision-log-mask-mode); their JSON pointers are listed under erased or masked"),
		of("decision-log-mask-mode", decisionlog.SettingMaskMode, &s.MaskMode, string(decisionlog.MaskDrop), "--decision-log-mask-labels: drop (remove the label, as OPA's remove) or replace (keep the key, value "+decisionlog.DefaultMaskValue+", as OPA's upsert)"),
		of("decision-log-buffer-size", decisionlog.SettingBufferSize, &s.BufferEvents, decisionlog.DefaultMaxEvents, "--decision-log: most events waiting for the sink; more are dropped and counted, so that a slow sink never slows a verb"),
		of("decision-log-flush-interval", decisionlog.SettingFlushInterval, &s.FlushInterval, decisionlog.DefaultFlushInterval, "--decision-log: how often buffered events are sent (sooner once 32 KiB are buffered)"),
		of("decision-log-upload-limit-bytes", decisionlog.SettingUploadLimitBytes, &s.UploadLimitBytes, decisionlog.DefaultUploadSizeLimitBytes, "http(s) --decision-log: largest upload, uncompressed JSON, in bytes (OPA's upload_size_limit_bytes)"),
		of("decision-log-timeout", decisionlog.SettingTimeout, &s.Timeout, decisionlog.DefaultTimeout, "http(s) --decision-log: timeout of each upload"),
		of("decision-log-max-retries", decisionlog.SettingMaxRetries, &s.MaxRetries, decisionlog.DefaultMaxRetries, "http(s) --decision-log: retries of a failed upload, with backoff, before its events are dropped and counted (0: none)"),
		of("decision-log-ca-cert", decisionlog.SettingCACert, &s.CACertFile, "", "https --decision-log: PEM file of the CAs the service's certificate must chain to (default: the system's roots)"),
		of("decision-log-bearer-token-file", decisionlog.SettingBearerTokenFile, &s.BearerTokenFile, "", "http(s) --decision-log: send the token in this file (read at every upload) as Authorization: Bearer"),
		of("decision-log-insecure", decisionlog.SettingInsecure, &s.Insecure, false, "allow --decision-log-bearer-token-file with an http:// --decision-log (refused by default: anyone on the path could read the token)"),
	}
}
