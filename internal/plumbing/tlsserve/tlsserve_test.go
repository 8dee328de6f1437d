package tlsserve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
)

// authority is a test CA that signs server and client certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(t *testing.T, name string) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns PEM certificate and key for a leaf with the given serial.
func (a *authority) issue(t *testing.T, serial int64, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func write(t *testing.T, path string, b []byte, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Explicit times: a rewrite within the file system's timestamp
	// granularity must still count as a change.
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// serve starts an HTTPS server with the reloader's config.
func serve(t *testing.T, r *Reloader) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = r.Config()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// call makes one request with a fresh connection and returns the server
// certificate's serial, or the error.
func call(t *testing.T, url string, roots []byte, clientCert tls.Certificate, withCert bool) (int64, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCert {
		cfg.Certificates = []tls.Certificate{clientCert}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
}

// servingFiles writes into dir a serving pair that ca signs (serial 100)
// and, unless clientCA is nil, clientCA's certificate, all modified at mod.
func servingFiles(t *testing.T, dir string, ca, clientCA *authority, mod time.Time) Files {
	t.Helper()
	files := Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	c, k := ca.issue(t, 100, x509.ExtKeyUsageServerAuth)
	write(t, files.CertFile, c, mod)
	write(t, files.KeyFile, k, mod)
	if clientCA != nil {
		files.ClientCAFile = filepath.Join(dir, "client-ca.crt")
		write(t, files.ClientCAFile, clientCA.pem, mod)
	}
	return files
}

func TestServingRotationAndClientAuth(t *testing.T) {
	dir := t.TempDir()
	ca := newAuthority(t, "server-ca")
	clientCA := newAuthority(t, "client-ca")
	otherCA := newAuthority(t, "other-ca")
	t0 := time.Now().Add(-time.Minute)
	files := servingFiles(t, dir, ca, clientCA, t0)

	log, hook := logtest.NewNullLogger()
	r, err := New(files, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, r)
	cc, ck := clientCA.issue(t, 7, x509.ExtKeyUsageClientAuth)
	good, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	oc, ok := otherCA.issue(t, 8, x509.ExtKeyUsageClientAuth)
	stranger, err := tls.X509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}

	if serial, err := call(t, srv.URL, ca.pem, good, true); err != nil || serial != 100 {
		t.Fatalf("client with a CA-signed certificate: serial %d, err %v; want 100, nil", serial, err)
	}
	if _, err := call(t, srv.URL, ca.pem, good, false); err == nil {
		t.Error("client without a certificate was accepted")
	}
	if _, err := call(t, srv.URL, ca.pem, stranger, true); err == nil {
		t.Error("client with a certificate of another CA was accepted")
	}

	// Rotation: the next handshake serves the new certificate.
	c2, k2 := ca.issue(t, 200, x509.ExtKeyUsageServerAuth)
	t1 := t0.Add(30 * time.Second)
	write(t, files.KeyFile, k2, t1)
	write(t, files.CertFile, c2, t1)
	if serial, err := call(t, srv.URL, ca.pem, good, true); err != nil || serial != 200 {
		t.Fatalf("after rotation: serial %d, err %v; want 200, nil", serial, err)
	}

	// A broken rotation keeps the last good certificate, and says so.
	write(t, files.CertFile, []byte("not a certificate"), t1.Add(30*time.Second))
	if serial, err := call(t, srv.URL, ca.pem, good, true); err != nil || serial != 200 {
		t.Fatalf("after a broken rotation: serial %d, err %v; want the previous 200", serial, err)
	}
	var warned bool
	for _, e := range hook.AllEntries() {
		warned = warned || strings.Contains(e.Message, "keeping the previous certificates")
	}
	if !warned {
		t.Error("no warning logged for the broken rotation")
	}
}

func TestServerOnlyTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newAuthority(t, "server-ca")
	files := servingFiles(t, dir, ca, nil, time.Now())
	log, _ := logtest.NewNullLogger()
	r, err := New(files, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, r)
	if _, err := call(t, srv.URL, ca.pem, tls.Certificate{}, false); err != nil {
		t.Errorf("client without a certificate, no client CA configured: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	write(t, garbage, []byte("x"), time.Now())
	ca := newAuthority(t, "server-ca")
	pair := Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	c, k := ca.issue(t, 1, x509.ExtKeyUsageServerAuth)
	write(t, pair.CertFile, c, time.Now())
	write(t, pair.KeyFile, k, time.Now())
	log, _ := logtest.NewNullLogger()
	tests := []struct {
		name  string
		files Files
		want  string
	}{
		{"no key", Files{CertFile: garbage}, "needs both a certificate and a private key"},
		{"missing files", Files{CertFile: filepath.Join(dir, "nope.crt"), KeyFile: filepath.Join(dir, "nope.key")}, "reading TLS files"},
		{"not PEM", Files{CertFile: garbage, KeyFile: garbage}, "loading TLS key pair"},
		{"client CA not PEM", Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile, ClientCAFile: garbage}, "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.files, log); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// issueClient returns a client key pair of a with the subject CN cn and the
// DNS and URI SANs given.
func (a *authority) issueClient(t *testing.T, serial int64, cn string, dns []string, uris ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames: dns,
	}
	for _, raw := range uris {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestAllowedClientNames: with an allow-list, a certificate of the client
// CA is admitted only when its CN, a DNS SAN or a URI SAN is listed; the
// others, and a client without a certificate, fail the handshake, with a
// logged reason; the list still holds after the files are rotated.
func TestAllowedClientNames(t *testing.T) {
	dir := t.TempDir()
	ca := newAuthority(t, "server-ca")
	clientCA := newAuthority(t, "client-ca")
	t0 := time.Now().Add(-time.Minute)
	files := servingFiles(t, dir, ca, clientCA, t0)
	files.AllowedClientNames = []string{"kube-scheduler", "scheduler.example", "spiffe://cluster.local/ns/kube-system/sa/kube-scheduler"}
	log, hook := logtest.NewNullLogger()
	r, err := New(files, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, r)

	tests := []struct {
		name     string
		cert     tls.Certificate
		withCert bool
		wantOK   bool
	}{
		{"the scheduler by CN", clientCA.issueClient(t, 1, "kube-scheduler", nil), true, true},
		{"the scheduler by DNS SAN", clientCA.issueClient(t, 2, "", []string{"scheduler.example"}), true, true},
		{"the scheduler by URI SAN", clientCA.issueClient(t, 3, "x", nil, "spiffe://cluster.local/ns/kube-system/sa/kube-scheduler"), true, true},
		{"another client of the same CA", clientCA.issueClient(t, 4, "system:node:node-1", []string{"node-1"}, "spiffe://cluster.local/ns/default/sa/default"), true, false},
		{"a name that only contains an allowed one", clientCA.issueClient(t, 5, "kube-scheduler-impostor", nil), true, false},
		{"no certificate", tls.Certificate{}, false, false},
	}
	check := func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				hook.Reset()
				_, err := call(t, srv.URL, ca.pem, tt.cert, tt.withCert)
				if (err == nil) != tt.wantOK {
					t.Fatalf("call() error = %v, want accepted = %v", err, tt.wantOK)
				}
				if tt.wantOK || !tt.withCert {
					return
				}
				var logged bool
				for _, e := range hook.AllEntries() {
					logged = logged || strings.Contains(e.Message, "none of the allowed client names")
				}
				if !logged {
					t.Error("no log says why the client was refused")
				}
			})
		}
	}
	t.Run("before rotation", check)
	c2, k2 := ca.issue(t, 200, x509.ExtKeyUsageServerAuth)
	t1 := t0.Add(30 * time.Second)
	write(t, files.KeyFile, k2, t1)
	write(t, files.CertFile, c2, t1)
	write(t, files.ClientCAFile, clientCA.pem, t1)
	t.Run("after rotation", check)
}

func TestAllowedClientNamesNeedAClientCA(t *testing.T) {
	dir := t.TempDir()
	ca := newAuthority(t, "server-ca")
	files := servingFiles(t, dir, ca, nil, time.Now())
	log, _ := logtest.NewNullLogger()
	tests := []struct {
		name  string
		names []string
		ca    string
		want  string
	}{
		{"no client CA", []string{"kube-scheduler"}, "", "need a client CA file"},
		{"an empty name", []string{"kube-scheduler", ""}, files.CertFile, "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := files
			f.AllowedClientNames, f.ClientCAFile = tt.names, tt.ca
			if _, err := New(f, log); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
