package localstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/regosched/regosched/test/localcluster"
)

// TLSFiles are the PEM files of the stack's mutual TLS variant
// (Variant.TLS), in the cluster folder: a CA, regosched's serving key pair
// (IP SAN 127.0.0.1) and kube-scheduler's client key pair, both signed by
// the CA. regosched trusts the CA for client certificates; the scheduler
// trusts it for regosched's certificate.
type TLSFiles struct {
	CA         string
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
}

// tlsValidity is how long the generated certificates are valid; a stack
// lives minutes.
const tlsValidity = 24 * time.Hour

// TLSFiles returns the stack's certificate files, generating them on first
// use. They are the same for the stack's whole life, so regosched and the
// scheduler can be restarted with them in any order.
func (s *Stack) TLSFiles() (TLSFiles, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tlsFilesLocked()
}

func (s *Stack) tlsFilesLocked() (TLSFiles, error) {
	if s.tlsFiles != nil {
		return *s.tlsFiles, nil
	}
	if s.cluster == nil {
		return TLSFiles{}, errors.New("TLS files: no cluster folder yet")
	}
	f, err := writeTLSFiles(filepath.Join(s.cluster.Dir(), "tls"))
	if err != nil {
		return TLSFiles{}, err
	}
	client, err := tlsClient(f)
	if err != nil {
		return TLSFiles{}, err
	}
	s.tlsFiles = &f
	s.tlsHTTP = client
	return f, nil
}

// TLSClientConfig returns a client configuration that trusts the stack's CA
// and, if withCert, presents the scheduler's client certificate, so a test
// can check what regosched does with a client without one.
func (s *Stack) TLSClientConfig(withCert bool) (*tls.Config, error) {
	f, err := s.TLSFiles()
	if err != nil {
		return nil, err
	}
	return tlsClientConfig(f, withCert)
}

func tlsClientConfig(f TLSFiles, withCert bool) (*tls.Config, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s holds no PEM certificate", f.CA)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if withCert {
		cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("loading client key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// tlsClient is the stack's own client of regosched over mutual TLS (its
// readiness wait and metrics scrapes), with the scheduler's certificate.
func tlsClient(f TLSFiles) (*http.Client, error) {
	cfg, err := tlsClientConfig(f, true)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Timeout: 5 * time.Second, Transport: tr}, nil
}

// client returns the HTTP client for regosched as it runs now.
func (s *Stack) client() *http.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.variant.TLS && s.tlsHTTP != nil {
		return s.tlsHTTP
	}
	return s.http
}

// scheme is "https" while the stack runs the TLS variant, else "http".
func (s *Stack) scheme() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.variant.TLS {
		return "https"
	}
	return "http"
}

// tlsExtenderArgs are the regosched serve flags of the TLS variant.
func tlsExtenderArgs(f TLSFiles) []string {
	return []string{
		"--tls-cert-file", f.ServerCert,
		"--tls-private-key-file", f.ServerKey,
		"--client-ca-file", f.CA,
	}
}

// withTLS turns every extender entry of a KubeSchedulerConfiguration (as
// SchedulerConfig returns it) to HTTPS with the stack's CA and the
// scheduler's client certificate, on the parsed document. The urlPrefix
// must already be https:// (ExtenderURL in the TLS variant).
func withTLS(cfg []byte, f TLSFiles) ([]byte, error) {
	return localcluster.EditExtenders(cfg, "TLS to configure, but", func(ext map[string]any) {
		ext["enableHTTPS"] = true
		ext["tlsConfig"] = map[string]any{
			"caFile":   f.CA,
			"certFile": f.ClientCert,
			"keyFile":  f.ClientKey,
		}
	})
}

// writeTLSFiles generates the CA and both key pairs (ECDSA P-256) into dir.
func writeTLSFiles(dir string) (TLSFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return TLSFiles{}, fmt.Errorf("TLS folder: %w", err)
	}
	f := TLSFiles{
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "regosched local test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(tlsValidity),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, fmt.Errorf("creating CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return f, err
	}
	leaves := []struct {
		serial         int64
		cn             string
		usage          x509.ExtKeyUsage
		ips            []net.IP
		certPath, keyP string
	}{
		{2, "regosched", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, f.ServerCert, f.ServerKey},
		{3, "kube-scheduler", x509.ExtKeyUsageClientAuth, nil, f.ClientCert, f.ClientKey},
	}
	for _, l := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return f, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(l.serial),
			Subject:      pkix.Name{CommonName: l.cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(tlsValidity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{l.usage},
			IPAddresses:  l.ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return f, fmt.Errorf("creating %s certificate: %w", l.cn, err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return f, err
		}
		if err := writePEM(l.certPath, "CERTIFICATE", der, 0o644); err != nil {
			return f, err
		}
		if err := writePEM(l.keyP, "EC PRIVATE KEY", kder, 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
