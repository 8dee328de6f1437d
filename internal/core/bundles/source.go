package bundles

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/policy"
)

// Config is where a policy comes from and the checks every bundle passes.
// `regosched serve` fills it from its --policy* flags; regosched-scheduler's
// plugin fills it from its arguments, so that both load, check and reload a
// policy alike.
type Config struct {
	// Path is a bundle directory, a .tar.gz or the http(s) URL of a bundle
	// on a bundle server; empty means Default.
	Path string
	// Default is the bundle at the root of an fs.FS loaded when Path is
	// empty: the default policy embedded in the binary.
	Default fs.FS
	// DataFile is a JSON file merged into the policy's
	// data.regosched.config (see Options.DataFile), watched with Poll;
	// empty: none.
	DataFile string
	// Poll is how often a local Path and DataFile are checked for changes;
	// 0 disables reloading them. A bundle server is polled by MinDelay and
	// MaxDelay instead.
	Poll time.Duration
	// VerificationKey, when set, requires signed bundles: a PEM public key
	// file, or the secret for HS* algorithms (see NewVerification).
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
	// nothing may decide without a policy.
	StartTimeout    time.Duration
	BearerTokenFile string
	// CACertFile is the PEM file of the CAs a bundle server's certificate
	// must chain to (default: the system's roots).
	CACertFile string
	// MaxBytes caps each file of a bundle and a downloaded bundle's size
	// (0: DefaultBundleSizeLimit).
	MaxBytes int64
	// MaxTotalBytes caps the sum of a bundle's files, decompressed, and
	// MaxEntries their number, both checked while the bundle streams (0:
	// DefaultBundleTotalLimit and DefaultBundleMaxEntries).
	MaxTotalBytes int64
	MaxEntries    int
	// Insecure allows a plain http:// bundle URL with a bearer token or
	// without a verification key.
	Insecure bool
	// Log receives the reloads and rejections; required.
	Log logrus.FieldLogger
}

// Source is an opened policy source: the first policy that passed every
// check, and what it takes to reload it later under the same checks.
type Source struct {
	cfg         Config
	opts        Options
	first       *policy.Policy
	description string
	// remote is nil unless the policy comes from a bundle server.
	remote *Remote
	// loaded is the fingerprint of a local Path and DataFile taken before
	// the first load, so that a change made while it compiled is seen.
	loaded string
}

// Open loads, checks and compiles the first policy of cfg. For a bundle
// server it retries an unreachable server until cfg.StartTimeout; a bundle
// that arrives and fails a check is an error at once.
func Open(ctx context.Context, cfg Config) (*Source, error) {
	if cfg.Log == nil {
		return nil, errors.New("bundles: Config.Log is required")
	}
	opts := Options{
		RunTests: cfg.RunTests, SizeLimitBytes: cfg.MaxBytes, TotalLimitBytes: cfg.MaxTotalBytes,
		MaxEntries: cfg.MaxEntries, DataFile: cfg.DataFile,
	}
	if cfg.VerificationKey != "" && cfg.DataFile != "" {
		// What a signed bundle runs with must be what was signed.
		return nil, errors.New("--policy-data cannot be combined with --policy-verification-key: a signed bundle's data is what was signed; put the settings in the bundle")
	}
	if cfg.VerificationKey != "" {
		if cfg.Path == "" {
			// The embedded policy carries no signature: running it would
			// silently skip the check the key asks for.
			return nil, errors.New("--policy-verification-key needs a signed --policy bundle: the embedded default policy is unsigned")
		}
		vc, err := NewVerification(cfg.VerificationKey, cfg.VerificationKeyID, cfg.SigningAlg, cfg.Scope)
		if err != nil {
			return nil, err
		}
		opts.Verification = vc
	}
	s := &Source{cfg: cfg, opts: opts}
	if IsRemote(cfg.Path) {
		s.remote = &Remote{
			URL: cfg.Path, MinDelay: cfg.MinDelay, MaxDelay: cfg.MaxDelay, LongPollingTimeout: cfg.LongPollingTimeout,
			BearerTokenFile: cfg.BearerTokenFile, CACertFile: cfg.CACertFile, Insecure: cfg.Insecure, Options: opts, Log: cfg.Log,
		}
		p, err := s.remote.First(ctx, cfg.StartTimeout)
		if err != nil {
			return nil, err
		}
		s.first, s.description = p, cfg.Path
		return s, nil
	}
	// Before the load: a change made while the first policy is being
	// compiled is then still a change to the watcher.
	fp, err := WatchFingerprint(cfg.Path, cfg.DataFile)
	if err != nil {
		return nil, err
	}
	p, description, err := opts.LoadLocal(ctx, cfg.Path, cfg.Default)
	if err != nil {
		return nil, err
	}
	s.first, s.description, s.loaded = p, description, fp
	return s, nil
}

// First returns the policy Open loaded.
func (s *Source) First() *policy.Policy { return s.first }

// Description says where the policy comes from, for logs: the path, the
// URL or EmbeddedName.
func (s *Source) Description() string { return s.description }

// Reloads returns the loop that stores each new good policy into active
// through activate (which may re-index before storing; nil stores at
// once), or nil when the policy cannot change: a local source with Poll 0,
// or the embedded default without a DataFile. A bundle that fails any check
// is recorded on active and never stored. Call it once: for a bundle server
// the loop continues from the bundle First returned.
func (s *Source) Reloads(active *Active, activate func(ctx context.Context, p *policy.Policy, store func())) func(ctx context.Context) {
	cfg := s.cfg
	switch {
	case s.remote != nil:
		s.remote.Active, s.remote.Activate = active, activate
		return s.remote.Run
	case (cfg.Path != "" || cfg.DataFile != "") && cfg.Poll > 0:
		w := &Watcher{
			Path: cfg.Path, FS: cfg.Default, Interval: cfg.Poll, Options: s.opts, Active: active,
			Log: cfg.Log, Activate: activate, Loaded: s.loaded,
		}
		return w.Run
	}
	return nil
}
