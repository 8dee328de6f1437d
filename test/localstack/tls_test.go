package localstack

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/test/localcluster"
)

func TestTLSFilesVerify(t *testing.T) {
	f, err := writeTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file holds no certificate")
	}
	for _, c := range []struct {
		cert, key string
		opts      x509.VerifyOptions
	}{
		{f.ServerCert, f.ServerKey, x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}},
		{f.ClientCert, f.ClientKey, x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
	} {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(c.opts); err != nil {
			t.Errorf("%s: %v", c.cert, err)
		}
	}
	if _, err := tlsClient(f); err != nil {
		t.Error(err)
	}
}

func TestWithTLS(t *testing.T) {
	root, err := localcluster.FindRepoRoot()
	if err != nil {
		t.Skip(err)
	}
	base, err := os.ReadFile(filepath.Join(root, schedulerConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := localcluster.SchedulerConfig(base, "/k", "https://127.0.0.1:1/scheduler")
	if err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{CA: "/t/ca.crt", ClientCert: "/t/client.crt", ClientKey: "/t/client.key"}
	out, err := withTLS(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Extenders []struct {
			URLPrefix   string            `json:"urlPrefix"`
			EnableHTTPS bool              `json:"enableHTTPS"`
			BindVerb    string            `json:"bindVerb"`
			TLSConfig   map[string]string `json:"tlsConfig"`
		} `json:"extenders"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Extenders) != 1 {
		t.Fatalf("extenders = %+v", doc.Extenders)
	}
	e := doc.Extenders[0]
	want := map[string]string{"caFile": f.CA, "certFile": f.ClientCert, "keyFile": f.ClientKey}
	if !e.EnableHTTPS || e.URLPrefix != "https://127.0.0.1:1/scheduler" || e.BindVerb != "bind" || len(e.TLSConfig) != 3 {
		t.Fatalf("extender = %+v", e)
	}
	for k, v := range want {
		if e.TLSConfig[k] != v {
			t.Errorf("tlsConfig.%s = %q, want %q", k, e.TLSConfig[k], v)
		}
	}
	if (Variant{TLS: true}).String() != "bindVerb on, mutual TLS" {
		t.Errorf("String() = %q", Variant{TLS: true}.String())
	}
}
