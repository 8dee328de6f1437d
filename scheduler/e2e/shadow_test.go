//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/localcluster"
	ls "github.com/regosched/regosched/test/localstack"
)

// TestPluginShadowRolloutCountsAndEnforcesNothing: regosched-scheduler
// with the plugin arg shadowPolicy (a bundle that denies more) places the
// scenario exactly as regosched-scheduler without it, every pod bound,
// and counts each disagreement on the scheduler's own /metrics
// (regosched_shadow_disagreements_total{verb="filter"}) and in its log,
// with the pod, the node and both verdicts.
func TestPluginShadowRolloutCountsAndEnforcesNothing(t *testing.T) {
	const nsOff, nsOn = "shadow-off", "shadow-on"
	ctx := t.Context()
	pc := startPluginCluster(t, 2)
	client := pc.c.Client()
	for _, n := range []string{nsOff, nsOn} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	plain, err := pc.c.StartSchedulerBinary(ctx, pc.bin, pc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Stop)
	off := placeScenario(t, pc.c, nsOff)
	plain.Stop()

	bundle := policytest.VariantFS(t, policytest.KeepClusterApart)
	policytest.SetRevision(t, bundle, "stricter-e2e")
	dir := policytest.WriteDir(t, bundle, t.TempDir())
	sched, metrics := startWithMetrics(t, pc, withPluginArgs(t, pc.cfg, map[string]any{"shadowPolicy": dir}))
	on := placeScenario(t, pc.c, nsOn)

	for _, got := range []map[string]string{off, on} {
		if diff := cmp.Diff(ls.ShadowTogether(), ls.Together(got)); diff != "" {
			t.Errorf("pods sharing a node (-want +got):\n%s", diff)
		}
	}

	want := 0
	for _, s := range ls.ShadowScenario() {
		want += s.Disagree
	}
	filter := `regosched_shadow_disagreements_total{verb="filter"}`
	var counts map[string]float64
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		counts = metrics(ctx)
		return counts[filter] >= float64(want), nil
	})
	if err != nil {
		t.Logf("shadow counters: %v", counts)
	}
	counts = metrics(ctx)
	wantCounts := map[string]float64{
		filter: float64(want),
		`regosched_shadow_disagreements_total{verb="prioritize"}`: 0,
		`regosched_shadow_dropped_total{verb="filter"}`:           0,
		`regosched_shadow_errors_total{verb="filter"}`:            0,
		`regosched_shadow_disagreements_unlogged_total`:           0,
	}
	gotCounts := map[string]float64{}
	for name := range wantCounts {
		gotCounts[name] = counts[name] // a vector's child never used is not exported: 0
	}
	if diff := cmp.Diff(wantCounts, gotCounts); diff != "" {
		t.Errorf("shadow counters on the scheduler's /metrics (-want +got):\n%s", diff)
	}
	t.Logf("%d pods placed with the shadow as without it; %v filter disagreements counted", len(on), counts[filter])

	var wantLines, gotLines []string
	for _, s := range ls.ShadowScenario() {
		for range s.Disagree {
			wantLines = append(wantLines, fmt.Sprintf("filter %s/%s on %s: active allowed, shadow denied", nsOn, s.Name, on[s.Name]))
		}
	}
	raw, err := os.ReadFile(sched.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range shadowLogLines(raw) {
		gotLines = append(gotLines, fmt.Sprintf("%s %s on %s: active %s, shadow %s", e["verb"], e["pod"], e["node"], e["active"], strings.SplitN(e["shadow"], ":", 2)[0]))
		t.Logf("logged: verb=%s pod=%s node=%s active=%q shadow=%q", e["verb"], e["pod"], e["node"], e["active"], e["shadow"])
	}
	slices.Sort(wantLines)
	slices.Sort(gotLines)
	if diff := cmp.Diff(wantLines, gotLines); diff != "" {
		t.Errorf("disagreement log lines (-want +got):\n%s", diff)
	}
}

// placeScenario creates the scenario's pods in ns one after the other,
// each once the one before is bound, and returns each pod's node.
func placeScenario(t *testing.T, c *localcluster.Cluster, ns string) map[string]string {
	t.Helper()
	placed := map[string]string{}
	for _, s := range ls.ShadowScenario() {
		p, err := c.Client().CoreV1().Pods(ns).Create(t.Context(), s.Pod(ns).Obj(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitLimit, true, func(ctx context.Context) (bool, error) {
			got, err := c.Client().CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			placed[s.Name] = got.Spec.NodeName
			return got.Spec.NodeName != "", nil
		})
		if err != nil {
			reason, _ := ls.FailedSchedulingReason(t.Context(), c.Client(), p)
			t.Fatalf("%s/%s not bound: %v (last FailedScheduling: %s)", ns, s.Name, err, reason)
		}
		t.Logf("%s/%s -> %s", ns, s.Name, placed[s.Name])
	}
	return placed
}

// startWithMetrics runs regosched-scheduler with cfg and a secure port on
// loopback whose /metrics anyone there may read (kube-scheduler's own
// certificate, self-signed into a folder of the test's), and returns it
// with a reader of its regosched_* series ("name{labels}": value).
func startWithMetrics(t *testing.T, pc pluginCluster, cfg []byte) (*localcluster.Process, func(context.Context) map[string]float64) {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	certDir := filepath.Join(dir, "certs")
	p, err := pc.c.StartProcess(t.Context(), "regosched-scheduler-shadow", pc.bin,
		"--config="+cfgPath,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+certDir,
		// Prometheus would present a token allowed to GET /metrics; here
		// the path is open to anyone on loopback.
		"--authorization-always-allow-paths=/healthz,/metrics",
		"-v=2",
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("regosched-scheduler log (tail):\n%s", p.LogTail(60))
		}
	})
	var client *http.Client
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	get := func(ctx context.Context, path string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
		}
		return body, err
	}
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, waitLimit, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("regosched-scheduler exited: %w", p.ExitError())
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
		_, err := get(ctx, "/healthz")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("regosched-scheduler with a metrics port never served /healthz: %v\n%s", err, p.LogTail(40))
	}
	return p, func(ctx context.Context) map[string]float64 {
		body, err := get(ctx, "/metrics")
		if err != nil {
			t.Fatalf("scraping regosched-scheduler's /metrics: %v", err)
		}
		out := map[string]float64{}
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "regosched_") {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			out[line[:i]] = v
		}
		return out
	}
}

// klogField is a key="quoted value" pair of klog's text format.
var klogField = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// shadowLogLines are the shadow's disagreement lines in a regosched-scheduler
// log (klog text, regosched's fields as key="value"), as their fields.
func shadowLogLines(raw []byte) []map[string]string {
	var out []map[string]string
	for line := range bytes.Lines(raw) {
		if !bytes.Contains(line, []byte(`"shadow policy disagrees`)) {
			continue
		}
		fields := map[string]string{}
		for _, m := range klogField.FindAllSubmatch(line, -1) {
			v, err := strconv.Unquote(`"` + string(m[2]) + `"`)
			if err != nil {
				v = string(m[2])
			}
			fields[string(m[1])] = v
		}
		out = append(out, fields)
	}
	return out
}
