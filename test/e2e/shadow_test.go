//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/core/policy/policytest"
	ls "github.com/regosched/regosched/test/localstack"
)

// TestShadowRolloutCountsAndEnforcesNothing is issue 38's shadow rollout
// on the real control plane: the scenario is placed once by the deployed
// regosched, then again by a regosched serving with --shadow-policy, a
// bundle that denies more. With the shadow, every pod is still bound, the
// pods the shadow would have kept apart share their nodes exactly as
// without it, and each disagreement is counted on serve's /metrics
// (regosched_shadow_disagreements_total{verb="filter"}) and logged with
// the pod, the node and both verdicts.
func TestShadowRolloutCountsAndEnforcesNothing(t *testing.T) {
	const nsOff, nsOn = "e2e-shadow-off", "e2e-shadow-on"
	ctx := setup(t, nsOff, nsOn)
	two := nodes(t, ctx, 2)

	off := placeShadowScenario(t, ctx, nsOff, two)

	bundle := policytest.VariantFS(t, policytest.KeepClusterApart)
	policytest.SetRevision(t, bundle, "stricter-e2e")
	dir := policytest.WriteDir(t, bundle, t.TempDir())
	args := slices.Concat(stack.Variant().ExtenderArgs, []string{"--shadow-policy", dir, "--log-format=json"})
	withVariant(t, ctx, ls.Variant{ExtenderArgs: args})
	logFrom := logSize(t)

	on := placeShadowScenario(t, ctx, nsOn, two)
	noViolations(t, ctx, nsOff, nsOn)

	// Nothing was enforced: the shadow would have refused every node that
	// holds a peer, yet the pods share them as without it.
	for _, got := range []map[string]string{off, on} {
		if diff := cmp.Diff(ls.ShadowTogether(), ls.Together(got)); diff != "" {
			t.Errorf("pods sharing a node (-want +got):\n%s", diff)
		}
	}

	want := 0
	for _, s := range ls.ShadowScenario() {
		want += s.Disagree
	}
	// The shadow judges off the request: wait for its queue to drain.
	var counts map[string]float64
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		counts = shadowCounters(t, ctx)
		return counts[`regosched_shadow_disagreements_total{verb="filter"}`] >= float64(want), nil
	})
	if err != nil {
		t.Logf("shadow counters: %v", counts)
	}
	counts = shadowCounters(t, ctx) // again: nothing more came in
	wantCounts := map[string]float64{
		`regosched_shadow_disagreements_total{verb="filter"}`:     float64(want),
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
		t.Errorf("shadow counters on /metrics (-want +got):\n%s", diff)
	}
	t.Logf("%d pods placed with the shadow as without it; %v filter disagreements counted", len(on), counts[`regosched_shadow_disagreements_total{verb="filter"}`])

	// Each disagreement names the pod and the very node it was bound to:
	// allowed by the active policy, denied by the shadow's extra rule.
	var wantLines, gotLines []string
	for _, s := range ls.ShadowScenario() {
		for range s.Disagree {
			wantLines = append(wantLines, fmt.Sprintf("filter %s/%s on %s: active allowed, shadow denied", nsOn, s.Name, on[s.Name]))
		}
	}
	for _, e := range shadowLogLines(t, logFrom) {
		// The shadow's verdict carries its reason, the peer's mark as the
		// policy words it.
		gotLines = append(gotLines, fmt.Sprintf("%s %s on %s: active %s, shadow %s", e.Verb, e.Pod, e.Node, e.Active, strings.SplitN(e.Shadow, ":", 2)[0]))
		t.Logf("logged: verb=%s pod=%s node=%s active=%q shadow=%q", e.Verb, e.Pod, e.Node, e.Active, e.Shadow)
	}
	slices.Sort(wantLines)
	slices.Sort(gotLines)
	if diff := cmp.Diff(wantLines, gotLines); diff != "" {
		t.Errorf("disagreement log lines (-want +got):\n%s", diff)
	}
}

// placeShadowScenario places the scenario in ns on nodes, one pod after
// the other, and returns each pod's node.
func placeShadowScenario(t *testing.T, ctx context.Context, ns string, nodes []string) map[string]string {
	t.Helper()
	placed := map[string]string{}
	for _, s := range ls.ShadowScenario() {
		placed[s.Name] = place(t, ctx, s.Pod(ns).OnNodes(nodes...).Obj())
	}
	return placed
}

// shadowCounters reads the shadow's counters from regosched's /metrics,
// as "name{labels}" to value.
func shadowCounters(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	body, err := stack.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "regosched_shadow_") {
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

// shadowLog is a shadow disagreement as regosched logs it (--log-format=json).
type shadowLog struct {
	Msg    string `json:"msg"`
	Verb   string `json:"verb"`
	Pod    string `json:"pod"`
	Node   string `json:"node"`
	Active string `json:"active"`
	Shadow string `json:"shadow"`
}

// regoschedLog is the path of regosched's log file (all its runs).
func regoschedLog(t *testing.T) string {
	t.Helper()
	path, ok := stack.LogPaths()["regosched"]
	if !ok {
		t.Fatal("the stack has no regosched log")
	}
	return path
}

// logSize is the size of regosched's log now, where this run's lines start.
func logSize(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(regoschedLog(t))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// shadowLogLines are the shadow's disagreement lines of regosched's log
// from offset on.
func shadowLogLines(t *testing.T, offset int64) []shadowLog {
	t.Helper()
	raw, err := os.ReadFile(regoschedLog(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []shadowLog
	for line := range bytes.Lines(raw[min(offset, int64(len(raw))):]) {
		var e shadowLog
		if json.Unmarshal(line, &e) != nil || !strings.HasPrefix(e.Msg, "shadow policy disagrees") {
			continue
		}
		out = append(out, e)
	}
	return out
}
