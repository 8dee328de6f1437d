// Package tlsserve builds the TLS configuration of regosched's server from
// certificate files that may be rotated on disk: the serving key pair and,
// optionally, the CA that client certificates must chain to and the names
// (CN or SAN) a client certificate must carry. Files are read
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
	"slices"
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
	// AllowedClientNames, when set (it needs ClientCAFile), admits only the
	// client certificates whose subject CN or one of whose DNS or URI SANs
	// is in the list: the client CA may sign certificates for others than
	// the scheduler (a cluster CA usually does).
	AllowedClientNames []string
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
	if len(files.AllowedClientNames) > 0 && files.ClientCAFile == "" {
		return nil, errors.New("allowed client names need a client CA file: without one, client certificates are not asked for")
	}
	for _, name := range files.AllowedClientNames {
		if name == "" {
			return nil, errors.New("allowed client names hold an empty name")
		}
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
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cur := r.current()
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cur.cert}}
			if cur.pool != nil {
				cfg.ClientAuth = tls.RequireAndVerifyClientCert
				cfg.ClientCAs = cur.pool
				if len(r.files.AllowedClientNames) > 0 {
					// Checked on every handshake, resumed ones included, after
					// the chain is verified against the current CA.
					cfg.VerifyConnection = func(cs tls.ConnectionState) error {
						return r.checkClientName(hello, cs)
					}
				}
			}
			return cfg, nil
		},
	}
}

// checkClientName refuses a client whose verified certificate carries none
// of the allowed names, and logs why.
func (r *Reloader) checkClientName(hello *tls.ClientHelloInfo, cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return errors.New("no verified client certificate")
	}
	leaf := cs.VerifiedChains[0][0]
	names := clientNames(leaf)
	for _, name := range names {
		if slices.Contains(r.files.AllowedClientNames, name) {
			return nil
		}
	}
	remote := ""
	if hello.Conn != nil {
		remote = hello.Conn.RemoteAddr().String()
	}
	r.log.WithFields(logrus.Fields{"remote": remote, "names": names, "allowed": r.files.AllowedClientNames}).
		Warn("TLS client refused: its certificate carries none of the allowed client names")
	return fmt.Errorf("client certificate names %q: none is an allowed client name", names)
}

// clientNames are the names a client certificate may be allowed by: its
// subject CN, DNS SANs and URI SANs (e.g. a SPIFFE ID).
func clientNames(c *x509.Certificate) []string {
	var names []string
	if c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	names = append(names, c.DNSNames...)
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	return names
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
