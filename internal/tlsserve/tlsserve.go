// Package tlsserve builds the TLS configuration of regosched's server from
// certificate files that may be rotated on disk: the serving key pair and,
// optionally, the CA that client certificates must chain to. Files are read
// again when their modification time changes, so a rotation (cert-manager, a
// mounted Secret) takes effect on the next handshake without a restart; a
// rotation that leaves unreadable files keeps the last good ones.
package tlsserve

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Files names the PEM files. ClientCAFile is optional: when set, clients
// must present a certificate signed by one of its CAs.
type Files struct {
	CertFile     string
	KeyFile      string
	ClientCAFile string
}

type loaded struct {
	cert    *tls.Certificate
	pool    *x509.CertPool
	modTime [3]time.Time
}

// Reloader serves the current certificates of Files.
type Reloader struct {
	files Files
	log   logrus.FieldLogger
	mu    sync.Mutex
	cur   *loaded
}

// New loads the files once; an error here is fatal (nothing good to keep).
func New(files Files, log logrus.FieldLogger) (*Reloader, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("TLS needs both a certificate and a private key file")
	}
	r := &Reloader{files: files, log: log}
	cur, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur = cur
	return r, nil
}

// Config returns a tls.Config that consults the files on every handshake.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cur := r.current()
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cur.cert}}
			if cur.pool != nil {
				cfg.ClientAuth = tls.RequireAndVerifyClientCert
				cfg.ClientCAs = cur.pool
			}
			return cfg, nil
		},
	}
}

// current reloads the files if one changed on disk, and returns what to serve.
func (r *Reloader) current() *loaded {
	r.mu.Lock()
	defer r.mu.Unlock()
	times, err := r.modTimes()
	if err != nil || times == r.cur.modTime {
		return r.cur
	}
	next, err := r.load()
	if err != nil {
		// Half-written files during a rotation, or a bad pair: keep serving
		// the last good certificates and try again on the next handshake.
		r.log.WithError(err).Warn("reloading TLS files failed; keeping the previous certificates")
		return r.cur
	}
	r.log.Info("TLS files changed; certificates reloaded")
	r.cur = next
	return next
}

func (r *Reloader) modTimes() ([3]time.Time, error) {
	var out [3]time.Time
	for i, f := range []string{r.files.CertFile, r.files.KeyFile, r.files.ClientCAFile} {
		if f == "" {
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return out, err
		}
		out[i] = st.ModTime()
	}
	return out, nil
}

func (r *Reloader) load() (*loaded, error) {
	times, err := r.modTimes()
	if err != nil {
		return nil, fmt.Errorf("reading TLS files: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.files.CertFile, r.files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS key pair %s, %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	l := &loaded{cert: &cert, modTime: times}
	if r.files.ClientCAFile != "" {
		pem, err := os.ReadFile(r.files.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading client CA file: %w", err)
		}
		l.pool = x509.NewCertPool()
		if !l.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA file %s holds no PEM certificate", r.files.ClientCAFile)
		}
	}
	return l, nil
}
