package bundles

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/policy"
)

// defaultBundleDir is the source of the default policy, tests included.
const defaultBundleDir = "../../../rego"

// defaultPolicy loads the embedded default policy once for all tests: a
// Policy is immutable and safe for concurrent use.
var defaultPolicy = sync.OnceValues(func() (*policy.Policy, error) {
	return Options{}.LoadFS(context.Background(), regosched.DefaultPolicy(), EmbeddedName)
})

func mustDefaultPolicy(tb testing.TB) *policy.Policy {
	tb.Helper()
	p, err := defaultPolicy()
	if err != nil {
		tb.Fatalf("loading the default policy: %v", err)
	}
	return p
}

// minimal is a small valid policy bundle without a manifest: pods are
// grouped by their label app, and two pods of one app keep off each
// other's node.
func minimal() fstest.MapFS {
	return fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""
`)},
		"regosched/claims.rego": {Data: []byte(`package regosched.claims

marks[input.pod.labels.app] := "{pod} of the same app"

separate contains {"mark": input.pod.labels.app, "rule": "same-app"}
`)},
		"regosched/config/data.json": {Data: []byte(`{"weight": 1}`)},
	}
}

// compileFS loads the bundle at the root of fsys, failing t if it is refused.
func compileFS(t *testing.T, fsys fs.FS) *policy.Policy {
	t.Helper()
	p, err := Options{}.LoadFS(context.Background(), fsys, "test bundle")
	if err != nil {
		t.Fatalf("LoadFS() error = %v", err)
	}
	return p
}

// testKey is a throwaway RSA key pair, in the PEM forms `opa sign` and
// --policy-verification-key take.
type testKey struct {
	private, public string
	// publicFile holds public, for flags that want a path.
	publicFile string
}

func newTestKey(t *testing.T) testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tk := testKey{
		private: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
		public:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
	}
	tk.publicFile = filepath.Join(t.TempDir(), "key.pub.pem")
	writeFile(t, tk.publicFile, tk.public)
	return tk
}

// copyPolicy copies the default policy bundle, with its tests or without, to
// a new temporary directory.
func copyPolicy(t *testing.T, withTests bool) string {
	t.Helper()
	src := defaultBundleDir
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !withTests && policy.IsTest(p) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// signDir writes dir/.signatures.json the way `opa sign --bundle` does: a
// JWT listing the SHA-256 of every file (JSON files hashed as parsed
// values), signed with sc under keyID.
func signDir(t *testing.T, dir string, sc *bundle.SigningConfig, keyID string) {
	t.Helper()
	hasher, err := bundle.NewSignatureHasher(bundle.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	var files []bundle.FileInfo
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == ".signatures.json" {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		var v any = raw
		if bundle.IsStructuredDoc(rel) {
			if err := util.UnmarshalJSON(raw, &v); err != nil {
				return err
			}
		}
		h, err := hasher.HashFile(v)
		if err != nil {
			return err
		}
		files = append(files, bundle.NewFile(rel, hex.EncodeToString(h), string(bundle.SHA256)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	token, err := bundle.GenerateSignedToken(files, sc, keyID)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := json.Marshal(bundle.SignaturesConfig{Signatures: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ".signatures.json"), string(sig))
}

// tarDir packs dir into a bundle .tar.gz as `opa build` lays it out (paths
// from the bundle root, with a leading slash) and returns its bytes.
func tarDir(t *testing.T, dir string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if err := tw.WriteHeader(&tar.Header{Name: "/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(raw)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(raw)
		return err
	})
	for _, c := range []interface{ Close() error }{tw, gz, f} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// manifest sets the bundle's revision.
func manifest(t *testing.T, dir, rev string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, ".manifest"), `{"revision": "`+rev+`", "roots": ["regosched"]}`)
}
