package shadow

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// spinPolicy groups every pod, and describes one of namespace spin for
// hours (ten billion products) unless cancelled; any other at once, so
// that it compiles (the compiler's smoke test describes a sample pod).
var spinPolicy = fstest.MapFS{"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains "all"

claims := {"marks": {"m": "spun"}, "separate": [], "spread": []} if {
	input.pod.namespace == "spin"
	count([1 | some i in numbers.range(1, 100000); some j in numbers.range(1, 100000); i * j < 0]) == 0
}
`)}}

func loadSpin(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := bundles.Options{}.LoadFS(context.Background(), spinPolicy, "spin")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testTimeout is the shadow's deadline in these tests, and slack what a
// loaded machine may add to it.
const testTimeout, slack = 200 * time.Millisecond, 2 * time.Second

// deniedByActive is a request for a pod of namespace ns whose node-1 the
// active policy denied: a shadow that judges it allows node-1, one
// disagreement.
func deniedByActive(ns string) *Request {
	pod := fixture.MakePod().Namespace(ns).Name("p0").Model()
	return NewFilterRequest(pod, nil, []string{"node-1"}, map[string]string{"node-1": "the active policy said no"})
}

// TestRunawayShadowTimesOut: a judgement under a shadow policy that loops
// on a pod ends within about Config.Timeout, whatever the caller's
// context, and is counted and logged as the shadow's error; a pod it
// judges at once is compared as ever.
func TestRunawayShadowTimesOut(t *testing.T) {
	pol := loadSpin(t)
	tests := []struct {
		name, namespace string
		want            map[string]float64
		wantTimeout     bool
	}{
		{name: "a pod the shadow loops on", namespace: "spin", want: map[string]float64{"errors": 1, "disagreements": 0}, wantTimeout: true},
		{name: "a pod it judges at once", namespace: "shop", want: map[string]float64{"errors": 0, "disagreements": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, hook := newShadow(t, pol, Config{Timeout: testTimeout})
			// The caller's context ends long after: only the shadow's own
			// deadline can end the loop in time (this one keeps a test
			// without it from running for hours).
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout+2*slack)
			defer cancel()
			start := time.Now()
			s.judge(ctx, deniedByActive(tt.namespace))
			if took := time.Since(start); took > testTimeout+slack {
				t.Errorf("judge took %v, want about the deadline %v", took, testTimeout)
			}
			got := map[string]float64{
				"errors":        testutil.ToFloat64(s.errs.WithLabelValues("filter")),
				"disagreements": testutil.ToFloat64(s.disagreements.WithLabelValues("filter")),
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("shadow metrics (-want +got):\n%s", diff)
			}
			timedOut := false
			for _, e := range hook.AllEntries() {
				if err, _ := e.Data[logrus.ErrorKey].(error); e.Level == logrus.WarnLevel && errors.Is(err, ErrTimeout) {
					timedOut = true
				}
			}
			if timedOut != tt.wantTimeout {
				t.Errorf("logged a warning wrapping ErrTimeout: %v, want %v", timedOut, tt.wantTimeout)
			}
		})
	}
}

// TestRunawayShadowFreesItsWorker: the one worker judges what is queued
// behind a judgement that loops, once its deadline has passed.
func TestRunawayShadowFreesItsWorker(t *testing.T) {
	s, _ := newShadow(t, loadSpin(t), Config{Timeout: testTimeout})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { s.Run(ctx) })
	if !s.Offer(deniedByActive("spin")) || !s.Offer(deniedByActive("shop")) {
		t.Fatal("Offer dropped a request")
	}
	deadline := time.Now().Add(2*testTimeout + slack)
	for testutil.ToFloat64(s.disagreements.WithLabelValues("filter")) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the request queued behind a looping one not judged within %v", 2*testTimeout+slack)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := testutil.ToFloat64(s.errs.WithLabelValues("filter")); got != 1 {
		t.Errorf("errors = %v, want 1", got)
	}
}
