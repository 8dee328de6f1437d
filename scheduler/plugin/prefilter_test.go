package plugin

import (
	"testing"
	"testing/fstest"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/core/policy"
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

// A runaway policy must not hold the scheduler's one cycle: PreFilter gives
// up after policy.DescribeTimeout with an error (the pod is retried).
func TestPreFilterStopsARunawayPolicy(t *testing.T) {
	f := newHarnessWith(t, options{policy: slowPolicy})
	pod := fixture.MakePod().Namespace(ns).Name("slow").Schedulable().Obj()
	pod.Labels = map[string]string{"slow": "yes"}
	done := make(chan *fwk.Status, 1)
	go func() {
		_, st := f.preFilter(t, pod)
		done <- st
	}()
	select {
	case st := <-done:
		if st.Code() != fwk.Error {
			t.Errorf("PreFilter = %v, want Error", st)
		}
	case <-time.After(3*policy.DescribeTimeout + 5*time.Second):
		t.Fatal("PreFilter still evaluating the policy")
	}
}

func TestPreFilterSkipsAPodInNoGroup(t *testing.T) {
	f := newHarness(t)
	_, st := f.preFilter(t, fixture.MakePod().Namespace(ns).Name("web").Schedulable().Obj())
	if st.Code() != fwk.Skip {
		t.Errorf("PreFilter = %v, want Skip", st)
	}
}
