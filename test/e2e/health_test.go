//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/plumbing/leader"
	ls "github.com/regosched/regosched/test/localstack"
)

// Two replicas over mutual TLS with --leader-elect and --health-listen, as
// deploy/tls/ha runs them: on the plain health port, which needs no client
// certificate, both replicas are ready (a standby is Ready too, so that
// rollouts and drains proceed); the health port serves no verb; the verb
// port serves nothing but the verbs (no /readyz, /metrics or /version
// there), refuses a client without a certificate, and lets the leader
// alone decide for one with it, the standby answering 503 "not the leader".
func TestHealthPortNextToMutualTLS(t *testing.T) {
	ctx := t.Context()
	files, err := stack.TLSFiles()
	if err != nil {
		t.Fatal(err)
	}
	lease := fmt.Sprintf("regosched-e2e-health-%d", time.Now().UnixNano())
	type replica struct {
		*ls.Replica
		main, health string // https://..., http://...
	}
	var replicas []replica
	for i := range 2 {
		healthAddr := freeLoopbackAddr(t)
		r, err := stack.StartReplica(ctx, fmt.Sprintf("regosched-health-%d", i),
			"--tls-cert-file", files.ServerCert, "--tls-private-key-file", files.ServerKey, "--client-ca-file", files.CA,
			"--health-listen", healthAddr,
			"--leader-elect", "--leader-elect-namespace", "default", "--leader-elect-name", lease)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		replicas = append(replicas, replica{r, "https://" + strings.TrimPrefix(r.BaseURL, "http://"), "http://" + healthAddr})
	}
	dump := func() {
		for _, r := range replicas {
			t.Logf("end of %s:\n%s", r.LogPath, r.LogTail(15))
		}
	}
	withCert, err := stack.TLSClientConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	noCert, err := stack.TLSClientConfig(false)
	if err != nil {
		t.Fatal(err)
	}

	// Settled: both ready on their health ports, one deciding over mutual
	// TLS, the other refusing as a standby.
	lead := -1
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, takeoverTimeout, true, func(context.Context) (bool, error) {
		var ready, leading, standing []int
		for i, r := range replicas {
			if code, _, _ := call(ctx, nil, http.MethodGet, r.health+"/readyz"); code == http.StatusOK {
				ready = append(ready, i)
			}
			code, body, _ := call(ctx, withCert, http.MethodPost, r.main+"/scheduler/filter")
			switch {
			case code == http.StatusOK:
				leading = append(leading, i)
			case code == http.StatusServiceUnavailable && strings.Contains(body, "not the leader"):
				standing = append(standing, i)
			}
		}
		if len(leading) > 1 {
			return false, fmt.Errorf("replicas %v decide at once", leading)
		}
		if len(leading) == 1 {
			lead = leading[0]
		}
		return len(ready) == 2 && len(leading) == 1 && len(standing) == 1, nil
	})
	if err != nil {
		dump()
		t.Fatalf("waiting for two ready replicas, one leading: %v", err)
	}
	standby := replicas[1-lead]
	t.Logf("replica %d leads", lead)

	tests := []struct {
		name       string
		tls        *tls.Config
		method     string
		url        string
		wantStatus int
		wantBody   string
	}{
		{"standby healthz, plain", nil, http.MethodGet, standby.health + "/healthz", http.StatusOK, `"status":"ok"`},
		{"standby ready, plain", nil, http.MethodGet, standby.health + "/readyz", http.StatusOK, `"status":"ok"`},
		{"leader ready, plain", nil, http.MethodGet, replicas[lead].health + "/readyz", http.StatusOK, `"status":"ok"`},
		{"leader metrics, plain", nil, http.MethodGet, replicas[lead].health + "/metrics", http.StatusOK, "regosched_cached_nodes"},
		{"standby metrics, plain", nil, http.MethodGet, standby.health + "/metrics", http.StatusOK, "regosched_cached_nodes"},
		{"version, plain", nil, http.MethodGet, standby.health + "/version", http.StatusOK, `"version"`},
		{"no filter on the health port", nil, http.MethodPost, replicas[lead].health + "/scheduler/filter", http.StatusNotFound, "no such endpoint"},
		{"no bind on the health port", nil, http.MethodPost, replicas[lead].health + "/scheduler/bind", http.StatusNotFound, "no such endpoint"},
		{"leader filter over mutual TLS", withCert, http.MethodPost, replicas[lead].main + "/scheduler/filter", http.StatusOK, `"NodeNames":["node-01"]`},
		{"standby filter over mutual TLS", withCert, http.MethodPost, standby.main + "/scheduler/filter", http.StatusServiceUnavailable, "not the leader"},
		{"no metrics on the verb port", withCert, http.MethodGet, replicas[lead].main + "/metrics", http.StatusNotFound, "no such endpoint"},
		{"no version on the verb port", withCert, http.MethodGet, replicas[lead].main + "/version", http.StatusNotFound, "no such endpoint"},
		{"no readyz on the verb port", withCert, http.MethodGet, replicas[lead].main + "/readyz", http.StatusNotFound, "no such endpoint"},
		{"no healthz on the verb port", withCert, http.MethodGet, standby.main + "/healthz", http.StatusNotFound, "no such endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, err := call(ctx, tt.tls, tt.method, tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.url, code, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
	// The main port never answers without a client certificate.
	for _, r := range replicas {
		if code, _, err := call(ctx, noCert, http.MethodGet, r.main+"/healthz"); err == nil {
			t.Errorf("%s/healthz without a client certificate: status %d, want a TLS error", r.main, code)
		}
	}
}

// deploy/tls/ha (deploy/ha plus the mutual TLS component) is accepted by
// the API server and keeps what both overlays need: two replicas,
// --leader-elect with the pod's name for the leader label, the TLS flags,
// probes on the plain health port, and a Service that selects the leader's
// label on the TLS port.
func TestDeployTLSHAOverlay(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(stack.RepoRoot(), "deploy/tls/ha")
	rendered, err := stack.Cluster().Kubectl(ctx, "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	objects := objectsIn(t, rendered)
	for _, o := range objects {
		if o.Kind == "Namespace" {
			if err := stack.EnsureNamespace(ctx, o.Metadata.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, err := stack.Cluster().Kubectl(ctx, "apply", "--dry-run=server", "-k", dir)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != len(objects) {
		t.Errorf("kubectl applied %d objects, kustomize rendered %d:\n%s", len(lines), len(objects), out)
	}
	t.Logf("kubectl apply --dry-run=server -k deploy/tls/ha:\n%s", out)

	var ext *appsv1.Deployment
	var svc *corev1.Service
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("parsing rendered manifests: %v", err)
		}
		switch {
		case o.Kind == "Deployment" && o.Metadata.Name == "regosched":
			ext = &appsv1.Deployment{}
			err = yaml.Unmarshal([]byte(doc), ext)
		case o.Kind == "Service" && o.Metadata.Name == "regosched":
			svc = &corev1.Service{}
			err = yaml.Unmarshal([]byte(doc), svc)
		}
		if err != nil {
			t.Fatalf("parsing %s %s: %v", o.Kind, o.Metadata.Name, err)
		}
	}
	if ext == nil || svc == nil {
		t.Fatal("no Deployment or no Service regosched in deploy/tls/ha")
	}
	if svc.Spec.Selector[leader.Label] != "true" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "https" {
		t.Errorf("Service selects %v on ports %+v, want the leader label and targetPort https", svc.Spec.Selector, svc.Spec.Ports)
	}
	if ext.Spec.Replicas == nil || *ext.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", ext.Spec.Replicas)
	}
	c := ext.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{"--leader-elect", "--client-ca-file=/etc/regosched/tls/ca.crt", "--health-listen=:8081"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	for name, p := range map[string]*struct{ path, port string }{
		"liveness":  probeOf(c.LivenessProbe),
		"readiness": probeOf(c.ReadinessProbe),
	} {
		if p == nil || p.port != "health" {
			t.Errorf("%s probe = %+v, want httpGet on port health", name, p)
		}
	}
	if p := probeOf(c.ReadinessProbe); p != nil && p.path != "/readyz" {
		t.Errorf("readiness probe path %s, want /readyz", p.path)
	}
	podName := false
	for _, e := range c.Env {
		if e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			podName = true
		}
	}
	if !podName {
		t.Errorf("env %+v lacks POD_NAME from metadata.name, which --pod-name defaults to", c.Env)
	}
}

// call sends a request (a filter-shaped body for POST) with a fresh client
// using cfg (plain HTTP when nil) and returns status and body.
func call(ctx context.Context, cfg *tls.Config, method, url string) (int, string, error) {
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"Pod":{"metadata":{"name":"x","namespace":"default"}},"NodeNames":["node-01"]}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, "", err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: tr}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// probeOf returns the path and named port of an httpGet probe, nil for
// another kind of probe.
func probeOf(p *corev1.Probe) *struct{ path, port string } {
	if p == nil || p.HTTPGet == nil {
		return nil
	}
	return &struct{ path, port string }{p.HTTPGet.Path, p.HTTPGet.Port.String()}
}

// freeLoopbackAddr returns a loopback address with a port free right now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
