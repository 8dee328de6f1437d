package decision

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/test/fixture"
)

// slowPolicy groups every pod, and describes one labelled slow=yes for
// hours (ten billion products) unless cancelled; any other at once, so that
// it compiles (the compiler's smoke test describes a sample pod).
var slowPolicy = fstest.MapFS{"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains "all"

claims := {"marks": {"m": "slow"}, "separate": [], "spread": []} if {
	input.pod.labels.slow == "yes"
	count([1 | some i in numbers.range(1, 100000); some j in numbers.range(1, 100000); i * j < 0]) == 0
}
`)}}

// Every verb bounds the policy's evaluations for its pod, whatever the
// caller's context: a policy that loops on a pod is answered with an error
// that says so and names the pod, within about EvalTimeout.
func TestVerbsStopARunawayPolicy(t *testing.T) {
	const timeout = 200 * time.Millisecond
	slow := fixture.MakePod().Namespace("shop").Name("slow-0").Label("slow", "yes").Model()
	args := func() *extenderv1.ExtenderArgs {
		return &extenderv1.ExtenderArgs{Pod: pendingPod(slow), NodeNames: names("node-1", "node-2")}
	}
	tests := []struct {
		name string
		call func(context.Context, *Decider) error
	}{
		{"filter", func(ctx context.Context, d *Decider) error {
			_, err := d.Filter(ctx, args())
			return err
		}},
		{"prioritize", func(ctx context.Context, d *Decider) error {
			_, err := d.Prioritize(ctx, args())
			return err
		}},
		{"preempt", func(ctx context.Context, d *Decider) error {
			_, err := d.Preempt(ctx, &extenderv1.ExtenderPreemptionArgs{Pod: pendingPod(slow),
				NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{"node-1": {}}})
			return err
		}},
		{"bind", func(ctx context.Context, d *Decider) error { return d.Bind(ctx, bindArgs(slow, "node-1")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, client := newDeciderWithPolicy(t, loadFS(t, slowPolicy, "slow"), nil, prometheus.NewRegistry(), Options{EvalTimeout: timeout})
			if _, err := client.CoreV1().Pods(slow.Namespace).Create(context.Background(), profilePod(slow, testScheduler), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- tt.call(context.Background(), d) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s still evaluating after 10s, want an error after about %v", tt.name, timeout)
			}
			if elapsed := time.Since(start); elapsed > timeout+2*time.Second {
				t.Errorf("%s answered after %v, want about %v", tt.name, elapsed, timeout)
			}
			if !errors.Is(err, ErrEvalTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s error = %v, want ErrEvalTimeout wrapping the deadline", tt.name, err)
			}
			if !strings.Contains(err.Error(), "pod shop/slow-0") {
				t.Errorf("%s error = %v, want it to name the pod", tt.name, err)
			}
		})
	}
}
