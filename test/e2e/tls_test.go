//go:build e2e

package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regosched/regosched/test/fixture"
	ls "github.com/regosched/regosched/test/localstack"
)

// With regosched serving HTTPS and requiring client certificates, the real
// kube-scheduler calls it over mutual TLS (enableHTTPS, tlsConfig with the
// CA and its client certificate): the rules hold, and a refusal carries
// regosched's reason, which only a filter call that went through can
// produce (ignorable: false, and regosched answers nothing but TLS). A
// client without a certificate is refused at the handshake meanwhile. The
// deployed configuration is restored at the end.
func TestMutualTLSScheduling(t *testing.T) {
	const ns = "e2e-tls"
	ctx := setup(t, ns)
	withVariant(t, ctx, ls.Variant{TLS: true})
	if u := stack.ExtenderURL(); !strings.HasPrefix(u, "https://") {
		t.Fatalf("extender URL %s in the TLS variant", u)
	}
	two := nodes(t, ctx, 2)

	// Two Redis masters of one cluster on two nodes: one per node; a third
	// has no node left.
	m0 := place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Schedulable().OnNodes(two...).Obj())
	m1 := place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-1-master").Redis("cache", "master", "1").Schedulable().OnNodes(two...).Obj())
	if m0 == m1 {
		t.Errorf("both masters on %s", m0)
	}
	reason := refuse(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Schedulable().OnNodes(two...).Obj())
	if want := "redis: master " + ns + "/cache-"; !strings.Contains(reason, want) {
		t.Errorf("FailedScheduling message %q does not contain %q", reason, want)
	}

	// Elasticsearch data pods, one more than nodes.
	used := map[string]string{}
	for i := range 2 {
		name := fmt.Sprintf("es-data-%d", i)
		n := place(t, ctx, fixture.MakePod().Namespace(ns).Name(name).Elasticsearch("es", "data").Schedulable().OnNodes(two...).Obj())
		if prev, ok := used[n]; ok {
			t.Errorf("%s and %s both on %s", prev, name, n)
		}
		used[n] = name
	}
	reason = refuse(t, ctx, fixture.MakePod().Namespace(ns).Name("es-data-2").Elasticsearch("es", "data").Schedulable().OnNodes(two...).Obj())
	for _, want := range []string{"elasticsearch: data " + ns + "/es-data-", "of cluster es already on this node"} {
		if !strings.Contains(reason, want) {
			t.Errorf("FailedScheduling message %q does not contain %q", reason, want)
		}
	}
	noViolations(t, ctx, ns)

	// The stack's own client presents the scheduler's certificate.
	if _, err := stack.Metrics(ctx); err != nil {
		t.Errorf("scrape with the client certificate: %v", err)
	}

	// A client that trusts the CA but has no certificate of its own is
	// refused during the handshake.
	noCert, err := stack.TLSClientConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := getWith(t, noCert, stack.BaseURL()+"/healthz"); err == nil {
		t.Errorf("GET /healthz without a client certificate: status %d, want a TLS error", code)
	} else {
		t.Logf("without a client certificate: %v", err)
		if !strings.Contains(err.Error(), "tls") {
			t.Errorf("error %q is not a TLS error", err)
		}
	}
	// Plain HTTP gets no answer from the scheduler's endpoint either.
	if code, err := getWith(t, nil, "http://"+strings.TrimPrefix(stack.BaseURL(), "https://")+"/healthz"); err == nil && code == http.StatusOK {
		t.Errorf("plain HTTP /healthz answered 200 in the TLS variant")
	}
	withCert, err := stack.TLSClientConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := getWith(t, withCert, stack.BaseURL()+"/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz with the client certificate: status %d, %v", code, err)
	}

	// The scheduler still works after the refused client.
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Schedulable().OnNodes(two...).Obj())
	noViolations(t, ctx, ns)
}

// getWith GETs url with a fresh client using cfg (plain HTTP when nil) and
// returns the status.
func getWith(t *testing.T, cfg *tls.Config, url string) (int, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return resp.StatusCode, err
}
