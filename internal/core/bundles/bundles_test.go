package bundles

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// signedCopy is a copy of the default policy (tests included) at revision
// s1, signed with key under keyID.
func signedCopy(t *testing.T, k testKey, keyID string) string {
	t.Helper()
	dir := copyPolicy(t, true)
	manifest(t, dir, "s1")
	signDir(t, dir, bundle.NewSigningConfig(k.private, "RS256", ""), keyID)
	return dir
}

func asTarball(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(p, tarDir(t, dir), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSignedBundles(t *testing.T) {
	key, other := newTestKey(t), newTestKey(t)
	verify := func(t *testing.T, keyID, scope string) *bundle.VerificationConfig {
		t.Helper()
		vc, err := NewVerification(key.publicFile, keyID, "RS256", scope)
		if err != nil {
			t.Fatal(err)
		}
		return vc
	}
	tamper := func(t *testing.T, dir string) string {
		t.Helper()
		// A rule dropped after signing: the kind of change a signature exists to catch.
		p := filepath.Join(dir, "regosched", "config", "data.json")
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, strings.Replace(string(raw), `"redis-masters"`, `"redis-masters-off"`, 1))
		return dir
	}
	tests := []struct {
		name   string
		bundle func(t *testing.T) string
		vc     func(t *testing.T) *bundle.VerificationConfig
		// wantErr is part of the error; empty: the bundle is accepted.
		wantErr string
	}{
		{"signed directory", func(t *testing.T) string { return signedCopy(t, key, "default") },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "") }, ""},
		{"signed tarball", func(t *testing.T) string { return asTarball(t, signedCopy(t, key, "default")) },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "") }, ""},
		{"key id other than default", func(t *testing.T) string { return signedCopy(t, key, "ops") },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "ops", "") }, ""},
		{"unsigned directory", func(t *testing.T) string { return copyPolicy(t, true) },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "") }, "bundle missing .signatures.json file"},
		{"unsigned tarball", func(t *testing.T) string { return asTarball(t, copyPolicy(t, true)) },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "") }, "bundle missing .signatures.json file"},
		{"tampered directory", func(t *testing.T) string { return tamper(t, signedCopy(t, key, "default")) },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "") }, "regosched/config/data.json: digest mismatch"},
		{"tampered tarball", func(t *testing.T) string { return asTarball(t, tamper(t, signedCopy(t, key, "default"))) },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "") }, "regosched/config/data.json: digest mismatch"},
		{"file added after signing", func(t *testing.T) string {
			dir := signedCopy(t, key, "default")
			writeFile(t, filepath.Join(dir, "regosched", "extra.rego"), "package regosched.extra\n\nx := 1\n")
			return dir
		}, func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "") }, "regosched/extra.rego not included in bundle signature"},
		{"signed with another key", func(t *testing.T) string { return signedCopy(t, other, "default") },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "") }, "verif"},
		{"scope mismatch", func(t *testing.T) string { return signedCopy(t, key, "default") },
			func(t *testing.T) *bundle.VerificationConfig { return verify(t, "", "prod") }, "scope mismatch"},
		{"signed bundle without a key", func(t *testing.T) string { return signedCopy(t, key, "default") },
			func(*testing.T) *bundle.VerificationConfig { return nil }, "verification key not provided"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Options{Verification: tt.vc(t)}.Load(context.Background(), tt.bundle(t))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("bundle refused: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("bundle accepted, want an error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestSignedBundleHMAC(t *testing.T) {
	dir := copyPolicy(t, true)
	signDir(t, dir, bundle.NewSigningConfig("s3cret", "HS256", ""), "default")
	for _, tt := range []struct {
		secret  string
		wantErr bool
	}{{"s3cret", false}, {"wrong", true}} {
		t.Run(tt.secret, func(t *testing.T) {
			vc, err := NewVerification(tt.secret, "default", "HS256", "")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Options{Verification: vc}.Load(context.Background(), dir)
			if (err != nil) != tt.wantErr {
				t.Errorf("Load() error = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}

func TestNewVerificationRejectsBadSettings(t *testing.T) {
	tests := []struct {
		name, key, alg, want string
	}{
		{"missing key file", filepath.Join(t.TempDir(), "nope.pem"), "RS256", "no such file"},
		{"unknown algorithm", "secret", "XX999", `unsupported signing algorithm "XX999"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewVerification(tt.key, "default", tt.alg, "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewVerification() error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRunTests(t *testing.T) {
	withTest := func(name, rego string) func(t *testing.T) string {
		return func(t *testing.T) string {
			dir := copyPolicy(t, true)
			if rego != "" {
				writeFile(t, filepath.Join(dir, "regosched", name), rego)
			}
			return dir
		}
	}
	tests := []struct {
		name     string
		bundle   func(t *testing.T) string
		runTests bool
		// want are parts of the error; none: accepted.
		want []string
	}{
		{"default policy passes its tests", withTest("", ""), true, nil},
		{"failing test refuses the bundle", withTest("broken_test.rego", "package regosched.broken_test\n\ntest_fails if false\n"), true,
			[]string{"policy tests: 1 of", "data.regosched.broken_test.test_fails: failed"}},
		{"erroring test refuses the bundle", withTest("broken_test.rego",
			"package regosched.broken_test\n\nx := 1\n\nx := 2\n\ntest_errs if x == 1\n"), true,
			[]string{"data.regosched.broken_test.test_errs: error:", "conflicting"}},
		{"failing test ignored without --policy-run-tests", withTest("broken_test.rego", "package regosched.broken_test\n\ntest_fails if false\n"), false, nil},
		{"a rule broken by a decision change is caught by the bundle's own tests", func(t *testing.T) string {
			dir := copyPolicy(t, true)
			p := filepath.Join(dir, "regosched", "config", "data.json")
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, strings.Replace(string(raw), `"peer_role": "master",`, `"peer_role": "replica",`, 1))
			return dir
		}, true, []string{"policy tests:", "failed"}},
		// Test modules are not part of decisions: this one would make
		// peer_keys answer a number, which the smoke test refuses.
		{"test modules stay out of decisions", withTest("keys_extra_test.rego", "package regosched\n\npeer_keys contains 6\n"), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Options{RunTests: tt.runTests}.Load(context.Background(), tt.bundle(t))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("bundle refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("bundle accepted, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
