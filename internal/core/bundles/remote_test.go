package bundles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/core/policy"
)

// bundleServer is an OPA bundle server for one bundle: ETags and 304s
// (unless noETag), long polling (if longPoll), a bearer token (if token),
// and a few failing answers first (failFirst).
type bundleServer struct {
	noETag, longPoll bool
	token            string
	failFirst        int

	mu      sync.Mutex
	body    []byte
	etag    string
	changed chan struct{} // closed at each publish, for long polls
	// full and notModified count bundle downloads and 304 answers.
	full, notModified, requests int
}

func (s *bundleServer) publish(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := sha256.Sum256(body)
	s.body, s.etag = body, `"`+hex.EncodeToString(sum[:8])+`"`
	if s.changed != nil {
		close(s.changed)
	}
	s.changed = make(chan struct{})
}

func (s *bundleServer) counts() (full, notModified int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full, s.notModified
}

func (s *bundleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	if s.requests <= s.failFirst {
		s.mu.Unlock()
		http.Error(w, "not yet", http.StatusServiceUnavailable)
		return
	}
	if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
		s.mu.Unlock()
		http.Error(w, "who are you", http.StatusUnauthorized)
		return
	}
	body, etag, changed := s.body, s.etag, s.changed
	s.mu.Unlock()
	if s.longPoll {
		w.Header().Set("Content-Type", "application/vnd.openpolicyagent.bundles")
	}
	if !s.noETag && r.Header.Get("If-None-Match") == etag {
		// A long poll waits for the next publish, at most the asked time.
		if s.longPoll && strings.Contains(r.Header.Get("Prefer"), "wait=") {
			select {
			case <-changed:
				s.mu.Lock()
				body, etag = s.body, s.etag
				s.mu.Unlock()
				s.send(w, body, etag)
				return
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		s.mu.Lock()
		s.notModified++
		s.mu.Unlock()
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.send(w, body, etag)
}

func (s *bundleServer) send(w http.ResponseWriter, body []byte, etag string) {
	s.mu.Lock()
	s.full++
	s.mu.Unlock()
	if !s.noETag {
		w.Header().Set("ETag", etag)
	}
	_, _ = w.Write(body)
}

// revisions makes tarballs of the default policy (tests included) at the
// given revisions, signed with key when it is not nil.
func revisions(t *testing.T, key *testKey, revs ...string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	dir := copyPolicy(t, true)
	for _, rev := range revs {
		manifest(t, dir, rev)
		if key != nil {
			signDir(t, dir, bundle.NewSigningConfig(key.private, "RS256", ""), "default")
		}
		out[rev] = tarDir(t, dir)
	}
	return out
}

// brokenTarball is the default policy plus a file that does not parse.
func brokenTarball(t *testing.T) []byte {
	t.Helper()
	dir := copyPolicy(t, true)
	manifest(t, dir, "broken")
	writeFile(t, filepath.Join(dir, "regosched", "broken.rego"), "package regosched.broken\n\nx := {")
	return tarDir(t, dir)
}

// nonStringKeys is a bundle that compiles but fails the smoke test.
func nonStringKeys(t *testing.T) []byte {
	t.Helper()
	dir := copyPolicy(t, true)
	manifest(t, dir, "non-string")
	writeFile(t, filepath.Join(dir, "regosched", "extra_keys.rego"), "package regosched\n\npeer_keys contains 6\n")
	return tarDir(t, dir)
}

type remoteFixture struct {
	remote    *Remote
	active    *Active
	activated chan string
	ctx       context.Context
	stop      func() // stops the source and waits for it
}

func startRemote(t *testing.T, srv *bundleServer, tweak func(*Remote)) *remoteFixture {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	reg := prometheus.NewRegistry()
	active, err := NewActive(reg)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := logtest.NewNullLogger()
	f := &remoteFixture{active: active, activated: make(chan string, 100)}
	f.remote = &Remote{
		URL: hs.URL + "/bundles/regosched.tar.gz", MinDelay: time.Second, MaxDelay: time.Second,
		Insecure: true, // httptest serves plain http
		Active:   active, Log: log,
		Activate: func(_ context.Context, p *policy.Policy, store func()) { store(); f.activated <- p.Revision() },
	}
	if tweak != nil {
		tweak(f.remote)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.ctx = ctx
	p, err := f.remote.First(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("First() = %v", err)
	}
	active.Store(p)
	done := make(chan struct{})
	go func() { f.remote.Run(ctx); close(done) }()
	f.stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(f.stop)
	return f
}

func (f *remoteFixture) waitFor(t *testing.T, what string, cond func(Status) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(f.ctx, 20*time.Millisecond, 15*time.Second, true,
		func(context.Context) (bool, error) { return cond(f.active.Status()), nil }); err != nil {
		t.Fatalf("waiting for %s: %v (status %+v)", what, err, f.active.Status())
	}
}

func (f *remoteFixture) reloads(result string) float64 {
	return testutil.ToFloat64(f.active.reloads.WithLabelValues(result))
}

func TestRemoteReloadsGoodBundlesOnly(t *testing.T) {
	for _, noETag := range []bool{false, true} {
		t.Run(map[bool]string{false: "etag", true: "no etag"}[noETag], func(t *testing.T) {
			t.Parallel() // mostly waiting for polls
			b := revisions(t, nil, "r1", "r2", "r3")
			srv := &bundleServer{noETag: noETag}
			srv.publish(b["r1"])
			f := startRemote(t, srv, nil)
			if got := f.active.Status().Revision; got != "r1" {
				t.Fatalf("revision after First = %q, want r1 (the manifest's)", got)
			}

			// Unchanged: polled, never activated again.
			time.Sleep(2100 * time.Millisecond)
			full, notModified := srv.counts()
			if noETag {
				if full < 2 {
					t.Errorf("without ETags: %d downloads, want the bundle downloaded at every poll", full)
				}
			} else if full != 1 || notModified < 1 {
				t.Errorf("with ETags: %d downloads and %d 304s, want 1 download and 304s after it", full, notModified)
			}

			srv.publish(b["r2"])
			f.waitFor(t, "revision r2", func(s Status) bool { return s.Revision == "r2" })

			// A broken bundle is refused once, however often it is polled.
			srv.publish(brokenTarball(t))
			f.waitFor(t, "the failure", func(s Status) bool { return s.LastError != "" })
			time.Sleep(2100 * time.Millisecond)
			st := f.active.Status()
			if st.Revision != "r2" || !strings.Contains(st.LastError, "broken.rego") || !strings.Contains(st.LastError, "rego_parse_error") {
				t.Errorf("Status() = %+v, want revision r2 and a parse error of broken.rego", st)
			}
			if got := f.reloads("failure"); got != 1 {
				t.Errorf("reloads{failure} = %v, want 1", got)
			}

			// One that parses but fails the smoke test: refused once too.
			srv.publish(nonStringKeys(t))
			f.waitFor(t, "the second failure", func(s Status) bool { return strings.Contains(s.LastError, "is not a string") })
			time.Sleep(2100 * time.Millisecond)
			if got := f.reloads("failure"); got != 2 {
				t.Errorf("reloads{failure} = %v, want 2", got)
			}

			// Back to the active bundle: nothing swapped, the error is gone.
			srv.publish(b["r2"])
			f.waitFor(t, "the error to clear", func(s Status) bool { return s.LastError == "" })

			srv.publish(b["r3"])
			f.waitFor(t, "revision r3", func(s Status) bool { return s.Revision == "r3" })
			// Activate runs after the swap that Status shows: stop the
			// source so that no call is still on its way.
			f.stop()
			close(f.activated)
			var got []string
			for rev := range f.activated {
				got = append(got, rev)
			}
			if diff := cmp.Diff([]string{"r2", "r3"}, got); diff != "" {
				t.Errorf("Activate calls (-want +got):\n%s", diff)
			}
			if got := f.reloads("success"); got != 2 {
				t.Errorf("reloads{success} = %v, want 2", got)
			}
		})
	}
}

func TestRemoteLongPolling(t *testing.T) {
	b := revisions(t, nil, "r1", "r2")
	srv := &bundleServer{longPoll: true}
	srv.publish(b["r1"])
	// Polls 30 s apart: only a held-open poll sees r2 within seconds.
	f := startRemote(t, srv, func(r *Remote) {
		r.MinDelay, r.MaxDelay, r.LongPollingTimeout = 30*time.Second, 30*time.Second, 20*time.Second
	})
	time.Sleep(500 * time.Millisecond) // let the first long poll reach the server
	start := time.Now()
	srv.publish(b["r2"])
	f.waitFor(t, "revision r2", func(s Status) bool { return s.Revision == "r2" })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("r2 active after %v, want it within seconds through long polling", d)
	}
}

func TestRemoteSignedBundles(t *testing.T) {
	key := newTestKey(t)
	signed := revisions(t, &key, "s1", "s2")
	vc, err := NewVerification(key.publicFile, "default", "RS256", "")
	if err != nil {
		t.Fatal(err)
	}
	srv := &bundleServer{}
	srv.publish(signed["s1"])
	f := startRemote(t, srv, func(r *Remote) { r.Options.Verification = vc })

	for _, tt := range []struct {
		name, want string
		body       []byte
	}{
		{"unsigned", "bundle missing .signatures.json file", revisions(t, nil, "u1")["u1"]},
		{"tampered", "digest mismatch", func() []byte {
			dir := copyPolicy(t, true)
			manifest(t, dir, "t1")
			signDir(t, dir, bundle.NewSigningConfig(key.private, "RS256", ""), "default")
			writeFile(t, filepath.Join(dir, "regosched", "keys.rego"), "package regosched\n\npeer_keys := set()\n")
			return tarDir(t, dir)
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv.publish(tt.body)
			f.waitFor(t, "the refusal", func(s Status) bool { return strings.Contains(s.LastError, tt.want) })
			if got := f.active.Status().Revision; got != "s1" {
				t.Errorf("revision = %q, want s1 kept", got)
			}
		})
	}
	srv.publish(signed["s2"])
	f.waitFor(t, "revision s2", func(s Status) bool { return s.Revision == "s2" && s.LastError == "" })
}

func TestRemoteFirst(t *testing.T) {
	key := newTestKey(t)
	vc, err := NewVerification(key.publicFile, "default", "RS256", "")
	if err != nil {
		t.Fatal(err)
	}
	good := revisions(t, nil, "r1")["r1"]
	tests := []struct {
		name    string
		srv     *bundleServer
		body    []byte
		tweak   func(*Remote)
		timeout time.Duration
		// wantErr is part of the error; empty: First succeeds with r1.
		wantErr string
		// fast: the error must come well before the timeout.
		fast bool
	}{
		{"retries a server that is not ready yet", &bundleServer{failFirst: 2}, good, nil, 10 * time.Second, "", false},
		{"sends the bearer token", &bundleServer{token: "t0k"}, good, func(r *Remote) {
			r.BearerTokenFile = filepath.Join(t.TempDir(), "token")
			writeFile(t, r.BearerTokenFile, "t0k\n")
		}, 10 * time.Second, "", false},
		{"gives up after the timeout", &bundleServer{failFirst: 1 << 30}, good, nil, 1500 * time.Millisecond,
			"within 1.5s (last error: server replied with Service Unavailable", false},
		{"refuses a broken bundle at once", &bundleServer{}, nil, nil, 30 * time.Second, "rego_parse_error", true},
		{"refuses an unsigned bundle at once", &bundleServer{}, good, func(r *Remote) { r.Options.Verification = vc },
			30 * time.Second, "bundle missing .signatures.json file", true},
		{"refuses a bundle whose tests fail", &bundleServer{}, func() []byte {
			dir := copyPolicy(t, true)
			writeFile(t, filepath.Join(dir, "regosched", "broken_test.rego"), "package regosched.broken_test\n\ntest_fails if false\n")
			return tarDir(t, dir)
		}(), func(r *Remote) { r.Options.RunTests = true }, 30 * time.Second, "data.regosched.broken_test.test_fails: failed", true},
		{"refuses a URL that is not http(s)", &bundleServer{}, good, func(r *Remote) { r.URL = "ftp://x/b.tar.gz" },
			30 * time.Second, "want http(s)://host/path", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if body == nil {
				body = brokenTarball(t)
			}
			tt.srv.publish(body)
			hs := httptest.NewServer(tt.srv)
			defer hs.Close()
			log, _ := logtest.NewNullLogger()
			r := &Remote{URL: hs.URL + "/b.tar.gz", MinDelay: time.Second, MaxDelay: time.Second, Insecure: true, Log: log}
			if tt.tweak != nil {
				tt.tweak(r)
			}
			start := time.Now()
			p, err := r.First(context.Background(), tt.timeout)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("First() = %v", err)
			case tt.wantErr == "":
				if p.Revision() != "r1" {
					t.Errorf("revision = %q, want r1", p.Revision())
				}
			case err == nil:
				t.Fatalf("First() succeeded, want an error containing %q", tt.wantErr)
			case !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("First() = %q, want it to contain %q", err, tt.wantErr)
			}
			if tt.fast && time.Since(start) > 5*time.Second {
				t.Errorf("First() took %v, want a refused bundle to fail at once", time.Since(start))
			}
		})
	}
}
