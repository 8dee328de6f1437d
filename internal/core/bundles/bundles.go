// Package bundles turns policy bundles into active policies: it reads a
// bundle directory, a .tar.gz or the default policy embedded in the binary
// with one loader (size limits, signatures, a data overlay, the bundle's own
// tests), watches a bundle on disk, polls a bundle server, and holds the
// active policy; Open and its Source put these together from one Config,
// for every front end that decides with a policy. A bundle that fails any
// check never replaces the active one. Evaluating a policy is package
// policy's part.
package bundles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"

	"github.com/regosched/regosched/internal/core/policy"
)

// Options say how bundles are read and what they must pass before they may
// become the active policy. The zero value reads unsigned bundles and runs
// none of their tests.
type Options struct {
	// Verification, when set, requires every bundle to carry a
	// .signatures.json whose signature verifies with its key and that lists
	// every file of the bundle with its digest.
	Verification *bundle.VerificationConfig
	// RunTests runs the bundle's own *_test.rego tests before activating it;
	// a failing or erroring test rejects the bundle like a compile error.
	RunTests bool
	// SizeLimitBytes caps each file of a bundle, and a downloaded bundle's
	// compressed size, so that a tarball whose header claims a huge file is
	// refused before anything is allocated for it; 0 means
	// DefaultBundleSizeLimit.
	SizeLimitBytes int64
	// TotalLimitBytes caps the sum of a bundle's files, decompressed, so
	// that many files each under SizeLimitBytes cannot add up to more than
	// the process can hold; 0 means DefaultBundleTotalLimit.
	TotalLimitBytes int64
	// MaxEntries caps the entries (files and directories) of a bundle;
	// 0 means DefaultBundleMaxEntries.
	MaxEntries int
	// DataFile, when set, is a JSON object merged into every bundle's
	// data.regosched.config before it is compiled (see withDataOverlay):
	// the default policy's settings changed without building a bundle.
	DataFile string
}

// DefaultBundleSizeLimit is the default of Options.SizeLimitBytes: far above
// any real policy, far below what would take the node's memory.
const DefaultBundleSizeLimit int64 = 64 << 20

// NewVerification builds the check of signed bundles the way OPA's
// --verification-key, --verification-key-id, --signing-alg and --scope flags
// do: key is the path of a PEM public key (RSA, ECDSA) or, for the HS*
// algorithms, the shared secret itself (or a file holding it).
func NewVerification(key, keyID, alg, scope string) (*bundle.VerificationConfig, error) {
	if alg == "" {
		alg = "RS256"
	}
	if keyID == "" {
		keyID = "default"
	}
	if !keys.IsSupportedAlgorithm(alg) {
		return nil, fmt.Errorf("unsupported signing algorithm %q", alg)
	}
	// OPA takes a key that is not an existing file as the key itself: for a
	// public key that means a mistyped path would only show as every bundle
	// failing to verify, so say it now.
	if !strings.HasPrefix(alg, "HS") && !strings.HasPrefix(strings.TrimSpace(key), "-----BEGIN") {
		if _, err := os.Stat(key); err != nil {
			return nil, fmt.Errorf("verification key for %s: %w", alg, err)
		}
	}
	kc, err := keys.NewKeyConfig(key, alg, scope)
	if err != nil {
		return nil, fmt.Errorf("reading verification key: %w", err)
	}
	return bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{keyID: kc}, keyID, scope, nil), nil
}

// Load reads the bundle directory or .tar.gz at p, checks it and compiles
// it: the one way a bundle from disk becomes a policy.
func (o Options) Load(ctx context.Context, p string) (*policy.Policy, error) {
	b, err := o.read(p)
	if err != nil {
		return nil, err
	}
	pol, err := o.compile(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", p, err)
	}
	return pol, nil
}

// LoadFS is Load for a bundle at the root of fsys (the default policy
// embedded in the binary), named name in errors.
func (o Options) LoadFS(ctx context.Context, fsys fs.FS, name string) (*policy.Policy, error) {
	b, err := o.readFS(fsys, name)
	if err != nil {
		return nil, err
	}
	p, err := o.compile(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return p, nil
}

// read reads the bundle directory or .tar.gz at p, every file (tests too: a
// signature covers them all) within the limits, verifying its signature
// when o.Verification is set. The limits are checked before OPA's reader
// holds what breaks them: from the listing of a directory, and entry by
// entry as a tarball streams to it.
func (o Options) read(p string) (*bundle.Bundle, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle: %w", err)
	}
	if info.IsDir() {
		// A Root keeps every open inside the directory.
		root, err := os.OpenRoot(p)
		if err != nil {
			return nil, fmt.Errorf("reading policy bundle: %w", err)
		}
		defer func() { _ = root.Close() }()
		return o.readFSAt(root.FS(), p, p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle: %w", err)
	}
	defer func() { _ = f.Close() }()
	return o.readWith(bundle.NewTarballLoaderWithBaseURL(newChecked(f, o.tally()), p), p)
}

func (o Options) readFS(fsys fs.FS, name string) (*bundle.Bundle, error) {
	return o.readFSAt(fsys, "", name)
}

// readFSAt reads the bundle at the root of fsys; base prefixes its files'
// URLs.
func (o Options) readFSAt(fsys fs.FS, base, name string) (*bundle.Bundle, error) {
	loader, err := o.newFSLoader(fsys, base)
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle %s: %w", name, err)
	}
	return o.readWith(loader, name)
}

// sizeLimit is SizeLimitBytes, or its default.
func (o Options) sizeLimit() int64 {
	if o.SizeLimitBytes > 0 {
		return o.SizeLimitBytes
	}
	return DefaultBundleSizeLimit
}

// readWith reads a bundle with every file capped at the size limit: the
// loader refuses a file by its size (on disk, or as a tar header claims it)
// before allocating for it, the reader whatever the loader let through.
func (o Options) readWith(loader bundle.DirectoryLoader, name string) (*bundle.Bundle, error) {
	limit := o.sizeLimit()
	b, err := bundle.NewCustomReader(loader.WithSizeLimitBytes(limit)).
		WithSizeLimitBytes(limit).WithBundleVerificationConfig(o.Verification).Read()
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle %s: %w", name, err)
	}
	return &b, nil
}

// compile merges the data overlay into b, compiles its decision modules
// (its tests left out) with policy.Compile and, with RunTests, runs its
// tests against the whole bundle.
func (o Options) compile(ctx context.Context, b *bundle.Bundle) (*policy.Policy, error) {
	if o.DataFile != "" {
		var err error
		if b, err = withDataOverlay(b, o.DataFile, o.sizeLimit()); err != nil {
			return nil, err
		}
	}
	p, err := policy.Compile(ctx, withoutTests(b))
	if err != nil {
		return nil, err
	}
	if o.RunTests {
		if err := policy.RunTests(ctx, b); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// withoutTests returns a copy of b without its *_test.rego modules.
func withoutTests(b *bundle.Bundle) *bundle.Bundle {
	decisions := *b
	decisions.Modules = nil
	for _, m := range b.Modules {
		if !policy.IsTest(m.Path) {
			decisions.Modules = append(decisions.Modules, m)
		}
	}
	return &decisions
}

// digest identifies a bundle's content (manifest, modules, data), to tell
// a re-download of the active bundle from a new one when the server sends
// no ETag.
func digest(b *bundle.Bundle) string {
	h := sha256.New()
	manifest, _ := json.Marshal(b.Manifest)
	_, _ = h.Write(manifest)
	mods := append([]bundle.ModuleFile(nil), b.Modules...)
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	for _, m := range mods {
		_, _ = fmt.Fprintf(h, "\x00%s\x00%d\x00", m.Path, len(m.Raw))
		_, _ = h.Write(m.Raw)
	}
	data, _ := json.Marshal(b.Data) // maps marshal with sorted keys
	_, _ = h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// EmbeddedName names the default policy embedded in the binary, in errors
// and in the policy status.
const EmbeddedName = "embedded default policy"

// LoadLocal loads the policy a --policy path names: the bundle at path, or
// the default policy embedded in the binary when path is empty. source is
// how the policy is named in logs and errors.
func (o Options) LoadLocal(ctx context.Context, path string, embedded fs.FS) (pol *policy.Policy, source string, err error) {
	if path == "" {
		pol, err = o.LoadFS(ctx, embedded, EmbeddedName)
		return pol, EmbeddedName, err
	}
	pol, err = o.Load(ctx, path)
	return pol, path, err
}
