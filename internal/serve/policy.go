package serve

import (
	"context"
	"errors"

	"github.com/regosched/regosched/internal/bundles"
	"github.com/regosched/regosched/internal/policy"
)

// loadPolicy reads, checks and compiles the first policy; for a bundle
// server it also returns the Remote that keeps polling it.
func loadPolicy(ctx context.Context, opts Options) (loaded, string, *bundles.Remote, error) {
	var popts bundles.Options
	bo := opts.Bundles
	popts.RunTests = bo.RunTests
	popts.SizeLimitBytes = bo.MaxBytes
	popts.TotalLimitBytes = bo.MaxTotalBytes
	popts.MaxEntries = bo.MaxEntries
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
		vc, err := bundles.NewVerification(bo.VerificationKey, bo.VerificationKeyID, bo.SigningAlg, bo.Scope)
		if err != nil {
			return loaded{}, "", nil, err
		}
		popts.Verification = vc
	}
	if bundles.IsRemote(opts.PolicyPath) {
		r := &bundles.Remote{
			URL: opts.PolicyPath, MinDelay: bo.MinDelay, MaxDelay: bo.MaxDelay, LongPollingTimeout: bo.LongPollingTimeout,
			BearerTokenFile: bo.BearerTokenFile, CACertFile: bo.CACertFile, Insecure: bo.Insecure, Options: popts, Log: opts.Log.WithField("component", "policy"),
		}
		p, err := r.First(ctx, bo.StartTimeout)
		if err != nil {
			return loaded{}, "", nil, err
		}
		return loaded{Policy: p, opts: popts}, opts.PolicyPath, r, nil
	}
	// Before the load: a change made while the first policy is being
	// compiled is then still a change to the watcher.
	fp, err := bundles.WatchFingerprint(opts.PolicyPath, opts.PolicyData)
	if err != nil {
		return loaded{}, "", nil, err
	}
	p, source, err := popts.LoadLocal(ctx, opts.PolicyPath, opts.DefaultPolicy)
	if err != nil {
		return loaded{}, "", nil, err
	}
	return loaded{p, popts, fp}, source, nil, nil
}

// loaded is the first policy and the checks later bundles pass too.
type loaded struct {
	*policy.Policy
	opts bundles.Options
	// fingerprint of a --policy file or directory, taken before loading it.
	fingerprint string
}
