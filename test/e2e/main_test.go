//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/test/deploytest"
	"github.com/regosched/regosched/test/localcluster"
	"github.com/regosched/regosched/test/localstack"
)

// stackNodes is the size of the shared cluster: node-01..node-08 over zones
// a, b, c. Tests narrow each pod's choice with fixture's OnNodes; the burst
// tests use all eight.
const stackNodes = 8

// cleanupTimeout bounds a test's clean-up, which runs after t.Context() is
// cancelled.
const cleanupTimeout = time.Minute

// stack is the one stack of this test binary. TestMain sets it before any
// test runs and nothing changes it afterwards; tests only use it.
var stack *localstack.Stack

// deployedArgs are regosched's flags as in deploy/ (--redis-roles), with
// checks often enough for tests to wait on; the memory of Redis roles goes
// to a namespace that exists here.
var deployedArgs = []string{"--redis-roles", "--redis-roles-interval=1s", "--audit-interval=5s", "--repair=plan", "--leader-elect-namespace=default"}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts the stack, runs the tests and stops the stack whatever
// happens: on return, on a panic in TestMain's goroutine, and on SIGINT or
// SIGTERM. Children also die with this process (see localcluster), so a
// panicking test leaves nothing running either.
func run(m *testing.M) int {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetLevel(logrus.InfoLevel)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started atomic.Pointer[localstack.Stack]
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		// During start-up, cancelling makes Start clean up and fail. Once
		// tests run, stop right away: they would only run into timeouts,
		// and an exit without Stop leaves temporary folders behind.
		cancel()
		if s := started.Load(); s != nil {
			s.Stop()
			os.Exit(2)
		}
	}()

	start := time.Now()
	// A policy other than the embedded one, e.g. a deliberately broken
	// copy, to check that the tests notice.
	policy := os.Getenv("REGOSCHED_E2E_POLICY")
	// The scheduler runs the Helm chart's KubeSchedulerConfiguration
	// (test/deploytest proves it equals deploy/'s, once adapted).
	root, err := localcluster.FindRepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	schedulerConfig, err := deploytest.Render{}.SchedulerConfig(ctx, root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rendering the chart's scheduler configuration:", err)
		return 1
	}
	s, err := localstack.Start(ctx, localstack.Options{Nodes: stackNodes, PolicyPath: policy, Log: log,
		ExtenderArgs: deployedArgs, SchedulerConfig: schedulerConfig})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the stack:", err)
		return 1
	}
	defer s.Stop()
	started.Store(s)
	stack = s
	log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("stack started")

	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, s.LogTails(80))
	}
	return code
}

// setup prepares a test: its namespaces exist and lose all their pods when
// the test ends, and on failure the test log gets the placement and the
// ends of the regosched and kube-scheduler logs.
func setup(t *testing.T, namespaces ...string) context.Context {
	t.Helper()
	ctx := t.Context()
	for _, ns := range namespaces {
		if err := stack.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		for _, ns := range namespaces {
			if err := stack.DeleteAllPods(ctx, ns); err != nil {
				t.Errorf("clean-up: %v", err)
			}
		}
	})
	// Registered last, so it runs first, while the pods still exist.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if pl, err := stack.Placement(ctx, namespaces...); err == nil {
			t.Logf("placement:\n%s", formatPlacement(pl))
		}
		t.Log(stack.LogTails(40))
	})
	return ctx
}

// nodes returns the first n node names.
func nodes(t *testing.T, ctx context.Context, n int) []string {
	t.Helper()
	all, err := stack.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < n {
		t.Fatalf("need %d nodes, have %v", n, all)
	}
	return all[:n]
}

// place creates pod and fails the test unless it is bound; it returns the
// node.
func place(t *testing.T, ctx context.Context, pod *corev1.Pod) string {
	t.Helper()
	node, pending, reason, err := stack.CreateAndWait(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if pending {
		t.Fatalf("pod %s/%s (%s) stayed pending: %s", pod.Namespace, pod.Name, localstack.Describe(pod.Labels), reason)
	}
	t.Logf("%s/%s -> %s", pod.Namespace, pod.Name, node)
	return node
}

// refuse creates pod and fails the test unless it stays pending; it returns
// the FailedScheduling message.
func refuse(t *testing.T, ctx context.Context, pod *corev1.Pod) string {
	t.Helper()
	node, pending, reason, err := stack.CreateAndWait(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if !pending {
		t.Fatalf("pod %s/%s (%s) was bound to %s, want it refused", pod.Namespace, pod.Name, localstack.Describe(pod.Labels), node)
	}
	t.Logf("%s/%s refused: %s", pod.Namespace, pod.Name, reason)
	return reason
}

// noViolations fails the test if the independent check finds a broken rule
// in namespaces that regosched did not say it let go: a rule per zone
// yields, with an Event on the pod, where no node took the pod under it.
func noViolations(t *testing.T, ctx context.Context, namespaces ...string) {
	t.Helper()
	broken, yielded, err := stack.Broken(ctx, namespaces...)
	if err != nil {
		t.Fatal(err)
	}
	if len(yielded) > 0 {
		t.Logf("rules per zone yielded (%s Event: the pod fit nowhere else):\n%s", localstack.ZoneRulesYielded, strings.Join(yielded, "\n"))
	}
	if len(broken) > 0 {
		t.Errorf("rules broken:\n%s", strings.Join(broken, "\n"))
	}
}

func formatPlacement(pl localstack.Placement) string {
	var b strings.Builder
	for _, n := range pl.Nodes {
		fmt.Fprintf(&b, "%s (%s):", n.Node, n.Zone)
		for _, p := range n.Pods {
			fmt.Fprintf(&b, " %s;", p)
		}
		b.WriteString("\n")
	}
	for _, p := range pl.Pending {
		fmt.Fprintf(&b, "pending %s: %s\n", p.PodSummary, p.Reason)
	}
	return b.String()
}

// withVariant restarts the shared stack's scheduler and regosched with v
// for the rest of the test, and back to the deployed configuration when it
// ends (registered as a clean-up, so it runs before clean-ups registered
// earlier, e.g. setup's pod deletion).
func withVariant(t *testing.T, ctx context.Context, v localstack.Variant) {
	t.Helper()
	before := stack.Variant()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := stack.Reconfigure(ctx, before); err != nil {
			t.Errorf("restoring %s: %v", before, err)
		}
	})
	start := time.Now()
	if err := stack.Reconfigure(ctx, v); err != nil {
		t.Fatal(err)
	}
	t.Logf("scheduler and regosched restarted with %s in %s", v, time.Since(start).Round(time.Millisecond))
}
