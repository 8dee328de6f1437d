package bundles

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// recorder serves a bundle and records the Authorization header of every
// request it gets.
type recorder struct {
	srv *bundleServer
	mu  sync.Mutex
	got []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.got = append(r.got, req.Header.Get("Authorization"))
	r.mu.Unlock()
	r.srv.ServeHTTP(w, req)
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// TestRemoteRefusesRedirects: an https bundle server that redirects to plain
// http, or to another host or port, is refused before anything is sent
// there (the bearer token least of all); a redirect within the server is
// followed.
func TestRemoteRefusesRedirects(t *testing.T) {
	good := revisions(t, nil, "r1")["r1"]
	newRecorder := func() *recorder {
		s := &bundleServer{}
		s.publish(good)
		return &recorder{srv: s}
	}
	plain, otherTLS := newRecorder(), newRecorder()
	plainSrv := httptest.NewServer(plain)
	defer plainSrv.Close()
	otherSrv := httptest.NewTLSServer(otherTLS)
	defer otherSrv.Close()

	origin := &bundleServer{token: "t0k"}
	origin.publish(good)
	mux := http.NewServeMux()
	mux.Handle("/bundle.tar.gz", origin)
	mux.Handle("/to-http", http.RedirectHandler(plainSrv.URL+"/bundle.tar.gz", http.StatusFound))
	mux.Handle("/to-other-port", http.RedirectHandler(otherSrv.URL+"/bundle.tar.gz", http.StatusFound))
	mux.Handle("/moved", http.RedirectHandler("/bundle.tar.gz", http.StatusMovedPermanently))
	originSrv := httptest.NewTLSServer(mux)
	defer originSrv.Close()

	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: originSrv.Certificate().Raw})))
	token := filepath.Join(dir, "token")
	writeFile(t, token, "t0k\n")

	tests := []struct {
		name, path string
		// target is the server redirected to, which must get nothing.
		target *recorder
		// wantErr are parts of the error; none: First succeeds with r1.
		wantErr []string
	}{
		{"https to http", "/to-http", plain, []string{"refused the redirect of policy bundle " + originSrv.URL + "/to-http",
			"to " + plainSrv.URL + "/bundle.tar.gz", "from https to http"}},
		{"to another port", "/to-other-port", otherTLS, []string{"refused the redirect", "to " + otherSrv.URL + "/bundle.tar.gz", "another host"}},
		{"within the server", "/moved", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			r := &Remote{URL: originSrv.URL + tt.path, MinDelay: time.Second, MaxDelay: time.Second,
				BearerTokenFile: token, CACertFile: ca, Log: log}
			start := time.Now()
			p, err := r.First(context.Background(), 20*time.Second)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("First() = %v", err)
				}
				if p.Revision() != "r1" {
					t.Errorf("revision = %q, want r1", p.Revision())
				}
				return
			}
			wantAll(t, "First", err, tt.wantErr...)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("First() took %v, want a refused redirect to fail at once", d)
			}
			if diff := cmp.Diff([]string(nil), tt.target.requests()); diff != "" {
				t.Errorf("requests the redirect's target got, by Authorization header (-want +got):\n%s", diff)
			}
		})
	}
}
