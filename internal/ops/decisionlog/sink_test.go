package decisionlog

import (
	"compress/gzip"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/plumbing/redirects"
)

// request is what a server got: its Authorization header and its body,
// un-gzipped.
type request struct{ Auth, Body string }

// recorder records every request it gets, whatever it is, and answers 204.
type recorder struct {
	mu  sync.Mutex
	got []request
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body []byte
	if zr, err := gzip.NewReader(req.Body); err == nil {
		body, _ = io.ReadAll(zr)
	}
	r.mu.Lock()
	r.got = append(r.got, request{Auth: req.Header.Get("Authorization"), Body: string(body)})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *recorder) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got...)
}

// TestHTTPSinkRefusesRedirects: an https decision log service that
// redirects an upload to plain http, or to another host or port, fails the
// upload before anything is sent there (neither the events nor the bearer
// token); a redirect within the service is followed. 307 and 308 keep the
// POST and its body, which Go's default client would send on.
func TestHTTPSinkRefusesRedirects(t *testing.T) {
	plain, otherTLS, origin := &recorder{}, &recorder{}, &recorder{}
	plainSrv := httptest.NewServer(plain)
	defer plainSrv.Close()
	otherSrv := httptest.NewTLSServer(otherTLS)
	defer otherSrv.Close()
	mux := http.NewServeMux()
	mux.Handle("/logs", origin)
	mux.Handle("/to-http/logs", http.RedirectHandler(plainSrv.URL+"/logs", http.StatusTemporaryRedirect))
	mux.Handle("/to-other-port/logs", http.RedirectHandler(otherSrv.URL+"/logs", http.StatusPermanentRedirect))
	mux.Handle("/moved/logs", http.RedirectHandler("/logs", http.StatusTemporaryRedirect))
	originSrv := httptest.NewTLSServer(mux)
	defer originSrv.Close()

	// Both TLS servers have httptest's one certificate.
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: originSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("t0k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const event = `{"decision_id":"d-1"}`
	delivered := []request{{Auth: "Bearer t0k", Body: "[" + event + "]"}}

	tests := []struct {
		name, path string
		// target is the server redirected to, which must get nothing.
		target *recorder
		// wantErr are parts of the error; none: the origin gets the batch.
		wantErr []string
	}{
		{"https to http", "/to-http", plain, []string{"refused the redirect of decision log " + originSrv.URL + "/to-http/logs",
			"to " + plainSrv.URL + "/logs", "from https to http"}},
		{"to another port", "/to-other-port", otherTLS, []string{"refused the redirect of decision log",
			"to " + otherSrv.URL + "/logs", "another host or port"}},
		{"within the service", "/moved", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(origin.requests())
			s := Settings{Target: originSrv.URL + tt.path, SampleRate: 1, CACertFile: ca, BearerTokenFile: token}
			cfg, err := s.Config(func(setting string) string { return setting })
			if err != nil {
				t.Fatal(err)
			}
			defer cfg.Sink.Close()
			err = cfg.Sink.Write(context.Background(), [][]byte{[]byte(event)})
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Write() = %v", err)
				}
				if diff := cmp.Diff(delivered, origin.requests()[before:]); diff != "" {
					t.Errorf("requests the service got (-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(err, redirects.ErrRefused) {
				t.Errorf("Write() = %v, want redirects.ErrRefused", err)
			}
			for _, part := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), part) {
					t.Errorf("Write() = %v, want it to say %q", err, part)
				}
			}
			if diff := cmp.Diff([]request(nil), tt.target.requests()); diff != "" {
				t.Errorf("requests the redirect's target got (-want +got):\n%s", diff)
			}
		})
	}
}
