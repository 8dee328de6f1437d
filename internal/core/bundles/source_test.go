package bundles

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/policy"
)

// TestOpenRefuses: settings that cannot give a trustworthy policy are
// refused before anything serves with it.
func TestOpenRefuses(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a verification key with the unsigned embedded policy",
			Config{VerificationKey: "secret", SigningAlg: "HS256"},
			"the embedded default policy is unsigned"},
		{"an unsigned bundle with a verification key",
			Config{Path: defaultBundleDir, VerificationKey: "secret", SigningAlg: "HS256"},
			"bundle missing .signatures.json file"},
		{"a bundle server with no bundle",
			Config{Path: notFound.URL + "/b.tar.gz", MinDelay: time.Second, MaxDelay: time.Second, StartTimeout: time.Second, Insecure: true},
			"no policy bundle from " + notFound.URL + "/b.tar.gz within 1s"},
		{"a bearer token over plain http",
			Config{Path: notFound.URL + "/b.tar.gz", MinDelay: time.Second, MaxDelay: time.Second, StartTimeout: time.Second, BearerTokenFile: "token"},
			"plain http would send the bearer token in clear text"},
		{"an unsigned bundle over plain http",
			Config{Path: notFound.URL + "/b.tar.gz", MinDelay: time.Second, MaxDelay: time.Second, StartTimeout: time.Second},
			"plain http lets anyone on the path replace an unsigned bundle"},
		{"a data overlay on a signed bundle",
			Config{Path: defaultBundleDir, DataFile: "data.json", VerificationKey: "secret", SigningAlg: "HS256"},
			"--policy-data cannot be combined with --policy-verification-key"},
		{"a data overlay that does not exist",
			Config{DataFile: "missing.json"},
			"reading policy data overlay"},
		{"a bundle file over --policy-max-bytes",
			Config{Path: defaultBundleDir, MaxBytes: 100},
			"exceeds the limit of 100 bytes per file (--policy-max-bytes)"},
		{"no logger", Config{}, "Config.Log is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "no logger" {
				tt.cfg.Log, _ = logtest.NewNullLogger()
			}
			tt.cfg.Default = regosched.DefaultPolicy()
			_, err := Open(context.Background(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestOpenSources: each kind of source gives its first policy, names
// itself, and has a reload loop exactly when its policy can change.
func TestOpenSources(t *testing.T) {
	dir := copyPolicy(t, false)
	manifest(t, dir, "local")
	overlay := filepath.Join(t.TempDir(), "data.json")
	writeFile(t, overlay, `{}`)
	srv := &bundleServer{}
	srv.publish(revisions(t, nil, "remote")["remote"])
	hs := httptest.NewServer(srv)
	defer hs.Close()
	url := hs.URL + "/bundles/regosched.tar.gz"
	embedded := mustDefaultPolicy(t).Revision()

	type result struct {
		Description string
		Revision    string
		Reloads     bool
	}
	tests := []struct {
		name string
		cfg  Config
		want result
	}{
		{"embedded", Config{Poll: time.Second}, result{EmbeddedName, embedded, false}},
		{"embedded with a watched overlay", Config{DataFile: overlay, Poll: time.Second}, result{EmbeddedName, embedded, true}},
		{"embedded with an overlay not watched", Config{DataFile: overlay}, result{EmbeddedName, embedded, false}},
		{"a watched directory", Config{Path: dir, Poll: time.Second}, result{dir, "local", true}},
		{"a directory not watched", Config{Path: dir}, result{dir, "local", false}},
		{"a bundle server", Config{Path: url, MinDelay: time.Second, MaxDelay: time.Second, StartTimeout: 10 * time.Second, Insecure: true},
			result{url, "remote", true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Default = regosched.DefaultPolicy()
			tt.cfg.Log, _ = logtest.NewNullLogger()
			src, err := Open(context.Background(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			active, err := NewActive(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			got := result{src.Description(), src.First().Revision(), src.Reloads(active, nil) != nil}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSourceReloadsAWatchedDirectory: a change to a watched directory,
// even one made between Open and the start of the loop, is stored through
// activate; a broken bundle never replaces the good one.
func TestSourceReloadsAWatchedDirectory(t *testing.T) {
	dir := copyPolicy(t, false)
	manifest(t, dir, "v1")
	log, _ := logtest.NewNullLogger()
	src, err := Open(context.Background(), Config{Path: dir, Poll: 20 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if got := src.First().Revision(); got != "v1" {
		t.Fatalf("First().Revision() = %q, want v1", got)
	}
	active, err := NewActive(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	active.Store(src.First())
	// Before the loop starts: Open's fingerprint makes it a change still.
	manifest(t, dir, "v2")

	activated := make(chan string, 10)
	loop := src.Reloads(active, func(_ context.Context, p *policy.Policy, store func()) {
		store()
		activated <- p.Revision()
	})
	if loop == nil {
		t.Fatal("Reloads() = nil for a watched directory")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { loop(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor := func(what string, cond func(Status) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
			func(context.Context) (bool, error) { return cond(active.Status()), nil }); err != nil {
			t.Fatalf("waiting for %s: %v (status %+v)", what, err, active.Status())
		}
	}
	waitFor("revision v2", func(s Status) bool { return s.Revision == "v2" })
	if got := <-activated; got != "v2" {
		t.Errorf("activate got %q, want v2", got)
	}

	manifest(t, dir, "broken")
	writeFile(t, filepath.Join(dir, "regosched", "broken.rego"), "package regosched.broken\n\nx := {")
	waitFor("the broken bundle rejected", func(s Status) bool { return s.LastError != "" })
	if got := active.Status(); got.Revision != "v2" || !strings.Contains(got.LastError, "broken.rego") {
		t.Errorf("status after a broken bundle = %+v, want v2 still active and the error naming broken.rego", got)
	}
	select {
	case rev := <-activated:
		t.Errorf("activate got %q, want no call for a broken bundle", rev)
	default:
	}
}
