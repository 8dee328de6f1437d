//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/ops/decisionlog/decisionlogtest"
	"github.com/regosched/regosched/test/fixture"
	ls "github.com/regosched/regosched/test/localstack"
)

// dlBurstExtra plain pods are added to the burst of burst_test.go (44
// pods on burstNodes nodes) to make the 48-pod burst of the issue.
const dlBurstExtra = 4

// dlBurst creates burst_test.go's burst plus dlBurstExtra plain pods at
// once, and waits until every pod is bound, relieving dead ends as
// runBurst does. It returns the pods and the time from the first create
// to the last binding.
func dlBurst(t *testing.T, ctx context.Context, ns string) ([]*corev1.Pod, time.Duration) {
	t.Helper()
	all := nodes(t, ctx, burstNodes)
	waves := burstPods(ns, all)
	for i := range dlBurstExtra {
		waves[1] = append(waves[1], fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("filler-extra-%d", i)).Schedulable().OnNodes(all...).Obj())
	}
	pods := slices.Concat(waves[0], waves[1])
	if len(pods) != 48 {
		t.Fatalf("burst of %d pods, want 48", len(pods))
	}
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	start := time.Now()
	for _, wave := range waves {
		g, gctx := errgroup.WithContext(ctx)
		for _, p := range wave {
			g.Go(func() error {
				_, err := stack.Client().CoreV1().Pods(ns).Create(gctx, p, metav1.CreateOptions{})
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("creating the burst: %v", err)
		}
	}
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, burstTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := stack.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pending = pending[:0]
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				pending = append(pending, p.Name)
			}
		}
		if replica := deadEnd(list.Items, all); replica != "" {
			t.Logf("DEAD END (not a broken rule): recreating replica %s, as runBurst does", replica)
			return false, recreate(ctx, byName[replica])
		}
		return len(list.Items) == len(pods) && len(pending) == 0, nil
	})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("after %s, %d of %d pods still pending (%s): %v", took.Round(time.Millisecond),
			len(pending), len(pods), strings.Join(pending, ", "), err)
	}
	noViolations(t, ctx, ns)
	return pods, took
}

// droppedEvents sums regosched_decision_logs_dropped_total by reason.
func droppedEvents(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	body, err := stack.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const name = `regosched_decision_logs_dropped_total{reason="`
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		reason, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			t.Fatalf("unexpected metrics line %q", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[reason] = v
	}
	if len(out) == 0 {
		t.Fatal("regosched serves no regosched_decision_logs_dropped_total: is --decision-log on?")
	}
	return out
}

func dlSum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// TestDecisionLog runs a 48-pod burst with decision logs sent to a real
// OPA decision log receiver: every pod's filter and bind decisions arrive,
// denials name their rule and peer, nothing is dropped. Then the same
// burst with a receiver that never answers: every pod is still bound in
// comparable time, and what the buffer could not hold is dropped and
// counted.
func TestDecisionLog(t *testing.T) {
	var took time.Duration

	t.Run("receiver", func(t *testing.T) {
		const ns = "e2e-decisionlog"
		ctx := setup(t, ns)
		rcv, url := decisionlogtest.Start(t)
		withVariant(t, ctx, ls.Variant{ExtenderArgs: append(slices.Clone(deployedArgs),
			"--decision-log="+url, "--decision-log-flush-interval=200ms")})
		var pods []*corev1.Pod
		pods, took = dlBurst(t, ctx, ns)

		// Every pod's last decision is its bind; flushes come every 200ms.
		names, nodes := make([]string, len(pods)), map[string]string{}
		for i, p := range pods {
			names[i], nodes[p.Name] = p.Name, p.Spec.NodeName
		}
		events := decisionlogtest.WaitBound(ctx, t, rcv, ns, names, 30*time.Second)
		burst := decisionlogtest.CheckBurst(t, events, ns, nodes)
		dropped := droppedEvents(t, ctx)
		if dlSum(dropped) != 0 {
			t.Errorf("regosched_decision_logs_dropped_total = %v, want 0", dropped)
		}
		t.Logf("48 pods bound in %s; receiver got %d events in %d uploads (%s), %d denials in %d events; dropped %v",
			took.Round(time.Millisecond), burst.Decisions, rcv.Uploads(), burst.Verbs(), burst.Denials, burst.WithDenials, dropped)
	})

	t.Run("stalled receiver", func(t *testing.T) {
		if took == 0 {
			t.Skip("needs the first case's time to compare with")
		}
		const ns = "e2e-decisionlog-stalled"
		ctx := setup(t, ns)
		_, url := decisionlogtest.StartStalled(t)
		// A small buffer, so that the burst overflows it while the first
		// upload hangs; the upload's timeout is longer than the burst.
		withVariant(t, ctx, ls.Variant{ExtenderArgs: append(slices.Clone(deployedArgs),
			"--decision-log="+url, "--decision-log-flush-interval=200ms", "--decision-log-buffer-size=16",
			"--decision-log-timeout=2m", "--decision-log-max-retries=0")})
		_, stalled := dlBurst(t, ctx, ns)
		dropped := droppedEvents(t, ctx)
		t.Logf("48 pods bound in %s behind a stalled receiver (%s with a live one); dropped %v",
			stalled.Round(time.Millisecond), took.Round(time.Millisecond), dropped)
		if dropped["buffer_events"] == 0 {
			t.Errorf("regosched_decision_logs_dropped_total = %v, want buffer_events counted", dropped)
		}
		// Comparable: the shared machine's noise allows a margin, but a
		// verb waiting on the upload would take minutes (its timeout).
		if limit := max(3*took, took+30*time.Second); stalled > limit {
			t.Errorf("burst took %s behind a stalled receiver, %s with a live one: over %s", stalled, took, limit)
		}
	})
}
