package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
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

// Load reads a bundle directory or .tar.gz with its test modules, verifying
// its signature when o.Verification is set.
func (o Options) Load(p string) (*bundle.Bundle, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle: %w", err)
	}
	if info.IsDir() {
		return o.read(bundle.NewDirectoryLoader(p), p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle: %w", err)
	}
	defer func() { _ = f.Close() }()
	return o.read(bundle.NewTarballLoaderWithBaseURL(f, p), p)
}

// LoadFS reads a bundle from the root of fsys, like Load.
func (o Options) LoadFS(fsys fs.FS, name string) (*bundle.Bundle, error) {
	loader, err := bundle.NewFSLoader(fsys)
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle %s: %w", name, err)
	}
	return o.read(loader, name)
}

// sizeLimit is SizeLimitBytes, or its default.
func (o Options) sizeLimit() int64 {
	if o.SizeLimitBytes > 0 {
		return o.SizeLimitBytes
	}
	return DefaultBundleSizeLimit
}

func (o Options) read(loader bundle.DirectoryLoader, name string) (*bundle.Bundle, error) {
	// Every file is read, tests too: a signature covers them all.
	return readLimited(loader, name, o.sizeLimit(), o.Verification)
}

// readLimited reads a bundle with every file capped at limit bytes: the
// loader refuses a file by its size (on disk, or as a tar header claims it)
// before allocating for it, the reader whatever the loader let through.
func readLimited(loader bundle.DirectoryLoader, name string, limit int64, vc *bundle.VerificationConfig) (*bundle.Bundle, error) {
	b, err := bundle.NewCustomReader(loader.WithSizeLimitBytes(limit)).
		WithSizeLimitBytes(limit).WithBundleVerificationConfig(vc).Read()
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle %s: %w", name, err)
	}
	return &b, nil
}

// Compile compiles the decision modules of b (its tests left out), smoke
// tests them (see Compile) and, with RunTests, runs b's tests against the
// whole bundle.
func (o Options) Compile(ctx context.Context, b *bundle.Bundle) (*Policy, error) {
	if o.DataFile != "" {
		limit := o.SizeLimitBytes
		if limit <= 0 {
			limit = DefaultBundleSizeLimit
		}
		var err error
		if b, err = withDataOverlay(b, o.DataFile, limit); err != nil {
			return nil, err
		}
	}
	decisions, tests := splitTests(b)
	p, err := Compile(ctx, decisions)
	if err != nil {
		return nil, err
	}
	if o.RunTests {
		if err := runTests(ctx, b, len(tests)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// splitTests returns a copy of b without its *_test.rego modules, and those.
func splitTests(b *bundle.Bundle) (*bundle.Bundle, []bundle.ModuleFile) {
	decisions := *b
	decisions.Modules = nil
	var tests []bundle.ModuleFile
	for _, m := range b.Modules {
		if isTest(m.Path) {
			tests = append(tests, m)
		} else {
			decisions.Modules = append(decisions.Modules, m)
		}
	}
	return &decisions, tests
}

func isTest(p string) bool { return strings.HasSuffix(path.Base(p), "_test.rego") }

// maxReportedTests bounds the failures named in a rejection.
const maxReportedTests = 5

// runTests runs the tests of b (as `opa test` would on it) and fails when
// any fails or errs. A bundle without tests passes.
func runTests(ctx context.Context, b *bundle.Bundle, n int) error {
	if n == 0 {
		return nil
	}
	modules := make(map[string]*ast.Module, len(b.Modules))
	for _, m := range b.Modules {
		modules[m.Path] = m.Parsed
	}
	store := inmem.NewFromObject(b.Data)
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return fmt.Errorf("running policy tests: %w", err)
	}
	defer store.Abort(ctx, txn)
	// One test at a time: a reload runs next to live decisions and must not
	// take every core from them. Tests are held to the same builtins as the
	// policy, since they run inside the scheduler too.
	ch, err := tester.NewRunner().SetCompiler(newCompiler()).SetStore(store).SetModules(modules).SetParallel(1).RunTests(ctx, txn)
	if errs, ok := errors.AsType[ast.Errors](err); ok {
		return compileErrors("running policy tests", errs)
	}
	if err != nil {
		return fmt.Errorf("running policy tests: %w", err)
	}
	var failed []string
	total := 0
	for r := range ch {
		total++
		name := r.Package + "." + r.Name
		switch {
		case r.Error != nil:
			failed = append(failed, fmt.Sprintf("%s: error: %v", name, r.Error))
		case r.Fail:
			failed = append(failed, name+": failed")
		}
	}
	if len(failed) == 0 {
		return nil
	}
	sort.Strings(failed)
	shown := failed
	if len(shown) > maxReportedTests {
		shown = shown[:maxReportedTests]
	}
	return fmt.Errorf("policy tests: %d of %d failed: %w", len(failed), total, errors.New(strings.Join(shown, "; ")))
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
