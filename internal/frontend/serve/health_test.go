package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/plumbing/tlsserve"
)

// TestHealthListenNextToMutualTLS: with --health-listen, probes that have no
// client certificate get health and readiness (with its reason) over plain
// HTTP, while the main port still refuses them at the TLS handshake and the
// health port serves no verb.
func TestHealthListenNextToMutualTLS(t *testing.T) {
	dir := t.TempDir()
	files := writeServerTLS(t, dir)
	addr, healthAddr := freeAddr(t), freeAddr(t)
	log, _ := logtest.NewNullLogger()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // also when the test fails early
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Listen: addr, HealthListen: healthAddr, TLS: files,
			Kubeconfig: unreachableKubeconfig(t, dir), Policy: bundles.Config{Default: regosched.DefaultPolicy()},
			URLPrefix: "/scheduler", Version: "test", Verbs: true, SchedulerName: "regosched", KubeAPIQPS: 10, KubeAPIBurst: 10, Log: log,
		})
	}()
	health := "http://" + healthAddr
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return get(health+"/healthz") == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("health port never answered /healthz: %v", err)
	}

	tests := []struct {
		name, method, path string
		wantStatus         int
		wantBody           string
	}{
		{"readyz says why not", http.MethodGet, "/readyz", http.StatusServiceUnavailable, "placement cache has not synced"},
		{"version", http.MethodGet, "/version", http.StatusOK, `"version":"test"`},
		{"metrics", http.MethodGet, "/metrics", http.StatusOK, "regosched_cached_nodes"},
		{"no filter", http.MethodPost, "/scheduler/filter", http.StatusNotFound, "no such endpoint"},
		{"no bind", http.MethodPost, "/scheduler/bind", http.StatusNotFound, "no such endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, tt.method, health+tt.path, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.path, resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
		})
	}

	// The main port: TLS with a client certificate required.
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(files.ClientCAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + "/healthz")
	if err == nil {
		_ = resp.Body.Close()
		t.Errorf("main port answered %d without a client certificate, want a TLS error", resp.StatusCode)
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("main port without a client certificate: %v, want a certificate error", err)
	}

	stopRun(t, cancel, done)
	if get(health+"/healthz") != 0 {
		t.Error("health port still answers after Run returned")
	}
}

func TestHealthListenBusyAddressFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	log, _ := logtest.NewNullLogger()
	// Bounded: without the health listener Run would serve until cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = Run(ctx, Options{
		Listen: freeAddr(t), HealthListen: ln.Addr().String(), Kubeconfig: unreachableKubeconfig(t, t.TempDir()),
		Policy: bundles.Config{Default: regosched.DefaultPolicy()}, Verbs: true, SchedulerName: "regosched", KubeAPIQPS: 10, KubeAPIBurst: 10, Log: log,
	})
	if err == nil || !strings.Contains(err.Error(), "(health)") {
		t.Errorf("Run() = %v, want an error naming the health address", err)
	}
}

// unreachableKubeconfig points at port 1 on loopback, where connections are
// refused: the cache never syncs.
func unreachableKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeServerTLS writes a CA and a serving key pair for 127.0.0.1 signed by
// it; the CA is also the client CA.
func writeServerTLS(t *testing.T, dir string) tlsserve.Files {
	t.Helper()
	now := time.Now()
	issue := func(tmpl, parent *x509.Certificate, signer *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if signer == nil {
			signer = key
		}
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
		if err != nil {
			t.Fatal(err)
		}
		return key, der
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caKey, caDER := issue(caTmpl, caTmpl, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, srvDER := issue(&x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "regosched"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}, ca, caKey)
	kder, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	f := tlsserve.Files{
		CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), ClientCAFile: filepath.Join(dir, "ca.crt"),
	}
	for path, block := range map[string]*pem.Block{
		f.ClientCAFile: {Type: "CERTIFICATE", Bytes: caDER},
		f.CertFile:     {Type: "CERTIFICATE", Bytes: srvDER},
		f.KeyFile:      {Type: "EC PRIVATE KEY", Bytes: kder},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
