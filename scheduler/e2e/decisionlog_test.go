//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/ops/decisionlog/decisionlogtest"
	ls "github.com/regosched/regosched/test/localstack"
)

// dlBurst creates a burst of 48 pods with rules in ns at once on nodes
// nodes and waits until every pod is bound; it returns the pods as bound
// and the time from the first create to the last binding.
func dlBurst(t *testing.T, pc pluginCluster, ns string, nodes int) ([]corev1.Pod, time.Duration) {
	t.Helper()
	ctx := t.Context()
	client := pc.c.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var nodeNames []string
	for i := range nodes {
		nodeNames = append(nodeNames, fmt.Sprintf("node-%02d", i+1))
	}
	pods := ls.FailoverPods(ns, nodeNames, 3, 3, 6)
	if len(pods) != 48 {
		t.Fatalf("burst of %d pods, want 48", len(pods))
	}
	start := time.Now()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			_, errs[i] = client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("creating the burst: %v", err)
	}
	var list *corev1.PodList
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitLimit, true, func(ctx context.Context) (bool, error) {
		var err error
		if list, err = client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
			return false, err
		}
		pending = pending[:0]
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				pending = append(pending, p.Name)
			}
		}
		return len(list.Items) == len(pods) && len(pending) == 0, nil
	})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("after %s, %d of %d pods still pending (%s): %v", took.Round(time.Millisecond), len(pending), len(pods),
			strings.Join(pending, ", "), err)
	}
	// Rules per zone yield, with an Event from the scheduler's recorder,
	// where the burst leaves a pod nowhere else; any other is broken.
	broken, yielded, err := ls.Broken(ctx, client, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(yielded) > 0 {
		t.Logf("rules per zone yielded (%s Event):\n%s", ls.ZoneRulesYielded, strings.Join(yielded, "\n"))
	}
	if len(broken) > 0 {
		t.Errorf("rules broken:\n%s", strings.Join(broken, "\n"))
	}
	return list.Items, took
}

// droppedEvents sums regosched_decision_logs_dropped_total by reason from
// a reader of the scheduler's /metrics.
func droppedEvents(t *testing.T, metrics func(context.Context) map[string]float64) map[string]float64 {
	t.Helper()
	const name = `regosched_decision_logs_dropped_total{reason="`
	out := map[string]float64{}
	for series, v := range metrics(t.Context()) {
		if reason, ok := strings.CutPrefix(series, name); ok {
			out[strings.TrimSuffix(reason, `"}`)] = v
		}
	}
	if len(out) == 0 {
		t.Fatal("regosched-scheduler's /metrics has no regosched_decision_logs_dropped_total: is decisionLog on?")
	}
	return out
}

// TestPluginDecisionLog is test/e2e's TestDecisionLog for regosched-scheduler:
// the plugin arg decisionLog points at a real OPA decision log receiver
// (gzip'd JSON arrays POSTed to /logs), and a burst of 48 pods with rules
// (3 Redis clusters of 4 shards, 3 Elasticsearch clusters of 6 data pods,
// 6 plain pods) is created at once on 8 nodes. Every pod is bound with no
// rule broken; the receiver has a filter and a bound bind event for every
// pod, every denial names its node, rule and peer, every event the
// policy revision; regosched_decision_logs_dropped_total stays 0. Then the
// same burst behind a receiver that never answers (a buffer of 16 events):
// every pod is bound in comparable time, and what the buffer could not
// hold is dropped and counted.
func TestPluginDecisionLog(t *testing.T) {
	const nodes = 8
	pc := startPluginCluster(t, nodes)
	var took time.Duration
	t.Run("receiver", func(t *testing.T) { took = pluginDecisionLog(t, pc, nodes) })
	t.Run("stalled receiver", func(t *testing.T) {
		if took == 0 {
			t.Skip("needs the first case's time to compare with")
		}
		_, url := decisionlogtest.StartStalled(t) // before the scheduler: stopped after it
		// A small buffer, so that the burst overflows it while the first
		// upload hangs; the upload's timeout is longer than the burst.
		sched, metrics := startWithMetrics(t, pc, withPluginArgs(t, pc.cfg, map[string]any{"decisionLog": map[string]any{
			"target": url, "flushInterval": "200ms", "bufferSize": 16, "timeout": "2m", "maxRetries": 0,
		}}))
		_, stalled := dlBurst(t, pc, "decisionlog-stalled", nodes)
		dropped := droppedEvents(t, metrics)
		t.Logf("48 pods bound in %s behind a stalled receiver (%s with a live one); dropped %v",
			stalled.Round(time.Millisecond), took.Round(time.Millisecond), dropped)
		if dropped["buffer_events"] == 0 {
			t.Errorf("regosched_decision_logs_dropped_total = %v, want buffer_events counted", dropped)
		}
		// Comparable: the shared machine's noise allows a margin, but a
		// cycle waiting on the upload would take minutes (its timeout).
		if limit := max(3*took, took+30*time.Second); stalled > limit {
			t.Errorf("burst took %s behind a stalled receiver, %s with a live one: over %s", stalled, took, limit)
		}
		// The framework closes the plugin when the scheduler stops: the
		// last flush gives up after 5 s rather than hold the shutdown.
		start := time.Now()
		sched.Stop()
		t.Logf("regosched-scheduler stopped in %s behind the stalled receiver", time.Since(start).Round(time.Millisecond))
	})
}

// pluginDecisionLog is TestPluginDecisionLog's case with a live receiver;
// it returns the burst's time.
func pluginDecisionLog(t *testing.T, pc pluginCluster, nodes int) time.Duration {
	const ns = "decisionlog"
	rcv, url := decisionlogtest.Start(t) // before the scheduler: stopped after it
	cfg := withPluginArgs(t, pc.cfg, map[string]any{"decisionLog": map[string]any{"target": url, "flushInterval": "200ms"}})
	sched, metrics := startWithMetrics(t, pc, cfg)
	bound, took := dlBurst(t, pc, ns, nodes)

	// A pod's bind event is its last; flushes come every 200ms.
	names, boundTo := make([]string, len(bound)), map[string]string{}
	for i, p := range bound {
		names[i], boundTo[p.Name] = p.Name, p.Spec.NodeName
	}
	events := decisionlogtest.WaitBound(t.Context(), t, rcv, ns, names, 30*time.Second)
	burst := decisionlogtest.CheckBurst(t, events, ns, boundTo)
	dropped := droppedEvents(t, metrics)
	var sum float64
	for _, v := range dropped {
		sum += v
	}
	if sum != 0 {
		t.Errorf("regosched_decision_logs_dropped_total = %v, want 0", dropped)
	}
	t.Logf("48 pods bound in %s (first create to last binding); receiver got %d events in %d uploads (%s), %d denials in %d events; dropped %v",
		took.Round(time.Millisecond), burst.Decisions, rcv.Uploads(), burst.Verbs(), burst.Denials, burst.WithDenials, dropped)
	sched.Stop() // the next case runs a scheduler of its own
	return took
}

// withPluginArgs sets args in the Regosched plugin's pluginConfig of the
// KubeSchedulerConfiguration cfg.
func withPluginArgs(t *testing.T, cfg []byte, args map[string]any) []byte {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		t.Fatal(err)
	}
	set := 0
	profiles, _ := doc["profiles"].([]any)
	for _, p := range profiles {
		pcs, _ := p.(map[string]any)["pluginConfig"].([]any)
		for _, pc := range pcs {
			entry, _ := pc.(map[string]any)
			if entry["name"] != "Regosched" {
				continue
			}
			have, _ := entry["args"].(map[string]any)
			if have == nil {
				have = map[string]any{}
				entry["args"] = have
			}
			for k, v := range args {
				have[k] = v
			}
			set++
		}
	}
	if set == 0 {
		t.Fatalf("no pluginConfig for Regosched in:\n%s", cfg)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
