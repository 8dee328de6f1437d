package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultControllers are the kube-controller-manager controllers
// StartControllerManager runs when given none: enough for Deployment
// rollouts (deployment, replicaset) and for evictions that respect a
// PodDisruptionBudget (disruption computes status.disruptionsAllowed, which
// the eviction API checks).
//
// The others stay off because they need what this cluster lacks (a kubelet,
// a cloud, kcm's own service account signing key) or fight the fake nodes:
// node-lifecycle would taint and evict every node whose kubelet never
// renews its heartbeat.
var DefaultControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"disruption-controller",
}

// StartControllerManager runs kube-controller-manager against the cluster
// with only the given controllers (DefaultControllers when none), and
// returns once it serves /healthz. Names are those of
// "kube-controller-manager --help" for --controllers (the canonical
// "deployment-controller" or the older alias "deployment"); an unknown name
// makes it exit, which is returned as an error with the end of its log.
//
// Like the other components, its output goes to
// Dir()/kube-controller-manager.log and it stops with the cluster.
func (c *Cluster) StartControllerManager(ctx context.Context, controllers ...string) (*Process, error) {
	return c.StartControllerManagerAs(ctx, "kube-controller-manager", controllers...)
}

// StartControllerManagerAs is StartControllerManager under another name,
// which names its log file and its certificate folder: a second
// kube-controller-manager beside the first, with other controllers, for
// a test that needs them only while it runs.
func (c *Cluster) StartControllerManagerAs(ctx context.Context, name string, controllers ...string) (*Process, error) {
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(c.dir, "pki", name)
	p, err := c.StartProcess(ctx, name, c.bins.KubeControllerManager,
		controllerManagerArgs(c.kubeconfigPath, certDir, ports[0], controllers)...)
	if err != nil {
		return nil, err
	}
	// The file holds the serving certificate and the CA that signed it.
	caFile := filepath.Join(certDir, "kube-controller-manager.crt")
	healthz := "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/healthz"
	if err := c.poll(ctx, p, name+" health", probeHealthz(healthz, caFile)); err != nil {
		p.Stop()
		return nil, err
	}
	c.log.WithField("controllers", strings.Join(controllers, ",")).Info(name + " ready")
	return p, nil
}

// controllerManagerArgs returns kube-controller-manager's command line.
func controllerManagerArgs(kubeconfig, certDir string, port int, controllers []string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		// Nothing else competes, and acquiring the lease only delays the
		// controllers' start by seconds.
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		// The secure port serves /healthz, which StartControllerManager
		// waits for, with a certificate self-signed into certDir.
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		// Every controller acts with the admin credentials: per-controller
		// service accounts would need the token controller and its key.
		"--use-service-account-credentials=false",
		// The default of 20 requests per second throttles controllers that
		// create hundreds of pods; nothing else shares this apiserver.
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		"--profiling=false",
		"-v=2",
	}
}

// probeHealthz returns a poll condition that is done once url answers 200
// over TLS verified against caFile, which the child writes when it starts.
func probeHealthz(url, caFile string) func(ctx context.Context) (bool, error) {
	var hc *http.Client
	return func(ctx context.Context) (bool, error) {
		if hc == nil {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return false, nil // not written yet
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return false, nil // partly written
			}
			hc = &http.Client{
				Timeout:   2 * time.Second,
				Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
			}
		}
		return answersOK(ctx, hc, url)
	}
}

// answersOK reports whether url answers a GET through hc with 200; a
// server not listening yet is no error.
func answersOK(ctx context.Context, hc *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("probing %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, nil // not listening yet
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK, nil
}
