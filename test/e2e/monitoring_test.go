//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
	ls "github.com/regosched/regosched/test/localstack"
	"github.com/regosched/regosched/test/monitoringtest"
)

// monitoringWait bounds each wait for a metric to show: the audit runs
// every 5 s and the Redis roles every second here (deployedArgs); the rest
// is margin for a busy machine.
const monitoringWait = 60 * time.Second

// probeProfile is the profile of the kube-scheduler this test starts to
// read a scheduler's /metrics: the stack's own scheduler serves no port,
// and a second one with the profile "regosched" would race it for the
// stack's pods.
const probeProfile = "regosched-monitoring-probe"

// targetLabels are attached by the scrape, not by the process.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "endpoint", "service"}

// TestMonitoringMetricsExported checks that every metric the alerts
// (deploy/helm/regosched/files/prometheus-rules.yaml) and the Grafana
// dashboard query is exported by running processes, with the labels their
// matchers test:
//   - regosched_*, go_* and process_* on the stack's regosched, after this
//     test has made it produce every labelled series (a CounterVec shows
//     on /metrics only once it has a child): a pod placed, one refused,
//     one unprotected, a violation, a Redis pod whose role cannot be read;
//   - regosched_policy_reloads_total on a replica started with a bundle
//     directory that this test breaks and repairs (the stack's regosched
//     runs the embedded policy and never reloads);
//   - scheduler_* on a kube-scheduler of the stack's version started here
//     with a metrics port and a profile of its own, after it has scheduled
//     one pod and found another unschedulable;
//   - up is made by Prometheus for each target: nothing exports it.
func TestMonitoringMetricsExported(t *testing.T) {
	const ns = "e2e-monitoring"
	ctx := setup(t, ns)
	root := stack.RepoRoot()

	rq, err := monitoringtest.RuleQueries(root)
	if err != nil {
		t.Fatal(err)
	}
	dq, err := monitoringtest.DashboardQueries(root)
	if err != nil {
		t.Fatal(err)
	}
	queries := append(slices.Clone(rq), dq...)
	names, err := monitoringtest.MetricNames(queries)
	if err != nil {
		t.Fatal(err)
	}
	matched := map[string][]string{} // metric -> label names its matchers test
	for _, q := range queries {
		uses, err := monitoringtest.Uses(q.Expr)
		if err != nil {
			t.Fatalf("%s: %v", q.Source, err)
		}
		for _, u := range uses {
			for _, l := range u.Labels {
				if !slices.Contains(matched[u.Metric], l) && !slices.Contains(targetLabels, l) {
					matched[u.Metric] = append(matched[u.Metric], l)
				}
			}
		}
	}
	var regoschedNames []string
	for name := range names {
		if name != "up" && !strings.HasPrefix(name, "scheduler_") && name != "regosched_policy_reloads_total" {
			regoschedNames = append(regoschedNames, name)
		}
	}
	sort.Strings(regoschedNames)

	// Series regosched creates only when something happens.
	start := time.Now()
	produceRegoschedSeries(t, ctx, ns)
	var regosched *monitoringtest.Exposition
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, monitoringWait, true, func(ctx context.Context) (bool, error) {
		body, err := stack.Metrics(ctx)
		if err != nil {
			return false, nil
		}
		if regosched, err = monitoringtest.ParseExposition(body); err != nil {
			return false, err
		}
		return len(unsampled(regosched, regoschedNames)) == 0, nil
	})
	if err != nil && regosched == nil {
		t.Fatalf("scraping regosched: %v", err)
	}
	t.Logf("regosched produced its series in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	reloads := policyReloadExposition(t, ctx, root)
	t.Logf("a replica reloaded its policy (failure, then success) in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	scheduler := schedulerExposition(t, ctx, ns)
	t.Logf("a kube-scheduler with a metrics port scheduled its pods in %s", time.Since(start).Round(time.Millisecond))

	all := make([]string, 0, len(names))
	for name := range names {
		all = append(all, name)
	}
	sort.Strings(all)
	for _, name := range all {
		t.Run(name, func(t *testing.T) {
			var e *monitoringtest.Exposition
			var where string
			switch {
			case name == "up":
				t.Skipf("up is made by Prometheus for each scrape target, exported by no process (used by %s)", strings.Join(names[name], "; "))
			case strings.HasPrefix(name, "scheduler_"):
				e, where = scheduler, "kube-scheduler"
			case name == "regosched_policy_reloads_total":
				e, where = reloads, "the regosched replica with a bundle directory"
			default:
				e, where = regosched, "regosched"
			}
			declared, sampled := e.Has(name)
			switch {
			case !declared && !sampled:
				t.Fatalf("%s does not export %s (used by %s)", where, name, strings.Join(names[name], "; "))
			case !sampled:
				t.Fatalf("%s declares %s but this test did not make it produce a sample (used by %s)", where, name, strings.Join(names[name], "; "))
			}
			have := e.Samples[name]
			t.Logf("exported by %s with labels %v", where, keys(have))
			for _, l := range matched[name] {
				if !have[l] && (l != "le" || !strings.HasSuffix(name, "_bucket")) {
					t.Errorf("%s exports %s without label %s, which a matcher tests (it has %v)", where, name, l, keys(have))
				}
			}
		})
	}
}

// produceRegoschedSeries makes the stack's regosched create the series
// that appear only with their first event.
func produceRegoschedSeries(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	n := nodes(t, ctx, 2)
	// Filter, prioritize and bind requests; a bind; a pod counted as
	// unprotected (no workload matches a plain pod).
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("es-data-0").Elasticsearch("es", "data").Schedulable().OnNodes(n[0]).Obj())
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("plain-0").Schedulable().OnNodes(n[0], n[1]).Obj())
	// A filter denial: a second data pod of the cluster on the same node.
	refuse(t, ctx, fixture.MakePod().Namespace(ns).Name("es-data-1").Elasticsearch("es", "data").Schedulable().OnNodes(n[0]).Obj())
	// A violation: a third one bound there directly, past the scheduler.
	direct := fixture.MakePod().Namespace(ns).Name("es-data-2").Elasticsearch("es", "data").Schedulable().Node(n[0]).Obj()
	if _, err := stack.Client().CoreV1().Pods(ns).Create(ctx, direct, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Redis role that cannot be read: a Redis Cluster pod (Bitnami's
	// labels) running at 127.0.0.1 on a port where nothing listens.
	port := freeLocalPort(t)
	redis := ls.BitnamiClusterPod(ns, "sessions-redis-cluster-0", port).Node(n[1]).Obj()
	if _, err := stack.Client().CoreV1().Pods(ns).Create(ctx, redis, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running(t, ctx, ns, redis.Name)
}

// unsampled returns the names that have no sample in e.
func unsampled(e *monitoringtest.Exposition, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := e.Samples[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// policyReloadExposition starts a replica on a copy of the default bundle,
// breaks the bundle, then repairs it, and returns the replica's /metrics
// once both a failed and a successful reload are counted.
func policyReloadExposition(t *testing.T, ctx context.Context, root string) *monitoringtest.Exposition {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "rego"))); err != nil {
		t.Fatal(err)
	}
	r, err := stack.StartReplica(ctx, "regosched-monitoring-reloads",
		"--policy", dir, "--policy-poll", "200ms", "--audit-interval=0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	scrape := func(ctx context.Context) (*monitoringtest.Exposition, error) {
		body, code, err := httpGet(ctx, http.DefaultClient, r.BaseURL+"/metrics")
		if err != nil {
			return nil, fmt.Errorf("scraping the replica: %w", err)
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("scraping the replica: status %d", code)
		}
		return monitoringtest.ParseExposition(body)
	}
	ready := func(ctx context.Context) (bool, error) {
		_, code, err := httpGet(ctx, http.DefaultClient, r.BaseURL+"/readyz")
		return err == nil && code == http.StatusOK, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, monitoringWait, true, ready); err != nil {
		t.Fatalf("the replica never became ready:\n%s", r.LogTail(40))
	}
	counted := func(result string) func(ctx context.Context) (bool, error) {
		sample := fmt.Sprintf(`regosched_policy_reloads_total{result=%q}`, result)
		return func(ctx context.Context) (bool, error) {
			body, code, err := httpGet(ctx, http.DefaultClient, r.BaseURL+"/metrics")
			return err == nil && code == http.StatusOK && strings.Contains(string(body), sample), nil
		}
	}
	broken := filepath.Join(dir, "regosched", "zz_broken.rego")
	if err := os.WriteFile(broken, []byte("package regosched\n\nthis is not rego {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, monitoringWait, true, counted("failure")); err != nil {
		t.Fatalf("no failed reload counted after breaking the bundle:\n%s", r.LogTail(40))
	}
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, monitoringWait, true, counted("success")); err != nil {
		t.Fatalf("no successful reload counted after repairing the bundle:\n%s", r.LogTail(40))
	}
	e, err := scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// schedulerExposition starts a kube-scheduler (the stack's binary) with a
// metrics port and the profile probeProfile, has it schedule one pod and
// find another unschedulable, and returns its /metrics.
func schedulerExposition(t *testing.T, ctx context.Context, ns string) *monitoringtest.Exposition {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: %s
`, stack.Cluster().KubeconfigPath(), probeProfile)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freeLocalPort(t)
	certDir := filepath.Join(dir, "certs")
	p, err := stack.Cluster().StartProcess(ctx, "kube-scheduler-monitoring", stack.Cluster().Binaries().KubeScheduler,
		"--config="+cfgPath,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+certDir,
		// Prometheus would present a token allowed to GET /metrics;
		// here the path is open to anyone on loopback.
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"-v=2",
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)

	var client *http.Client
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	up := func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("kube-scheduler exited: %w", p.ExitError())
		}
		if client == nil {
			pem, err := os.ReadFile(filepath.Join(certDir, "kube-scheduler.crt"))
			if err != nil {
				return false, nil // not written yet
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return false, nil // partly written
			}
			client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			}}
		}
		_, code, err := httpGet(ctx, client, url+"/healthz")
		return err == nil && code == http.StatusOK, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, monitoringWait, true, up); err != nil {
		t.Fatalf("kube-scheduler with a metrics port never served /healthz: %v\n%s", err, p.LogTail(40))
	}

	pods := stack.Client().CoreV1().Pods(ns)
	fits := fixture.MakePod().Namespace(ns).Name("probe-fits").Schedulable().SchedulerName(probeProfile).Obj()
	huge := fixture.MakePod().Namespace(ns).Name("probe-too-big").Schedulable().SchedulerName(probeProfile).Obj()
	huge.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100000")
	for _, pod := range []*corev1.Pod{fits, huge} {
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stack.WaitBound(ctx, ns, fits.Name, monitoringWait); err != nil {
		t.Fatalf("the probe scheduler did not bind %s: %v\n%s", fits.Name, err, p.LogTail(40))
	}

	var e *monitoringtest.Exposition
	scraped := func(ctx context.Context) (bool, error) {
		body, code, err := httpGet(ctx, client, url+"/metrics")
		if err != nil || code != http.StatusOK {
			return false, nil
		}
		if e, err = monitoringtest.ParseExposition(body); err != nil {
			return false, err
		}
		return strings.Contains(string(body), `result="unschedulable"`), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, monitoringWait, true, scraped); err != nil {
		if e == nil {
			t.Fatalf("scraping kube-scheduler's /metrics: %v\n%s", err, p.LogTail(40))
		}
		t.Logf("kube-scheduler never counted the unschedulable pod; checking what it exports")
	}
	return e
}

// httpGet returns url's body and status.
func httpGet(ctx context.Context, c *http.Client, url string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// freeLocalPort returns a loopback port nothing listens on now.
func freeLocalPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
