package plugin

import (
	"context"

	"github.com/google/go-cmp/cmp"
	"testing"
	"testing/fstest"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/internal/policy"
	ls "github.com/regosched/regosched/test/localstack"
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
	f := newFixtureWith(t, options{policy: slowPolicy})
	pod := ls.PlainPod(ns, "slow")
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

// A pod in no group passes every node, and its preemption dry run still
// spares the pods the policy protects: Redis masters, here.
func TestAPodInNoGroupPassesButSparesProtectedPods(t *testing.T) {
	f := newFixture(t)
	pod := ls.PlainPod(ns, "web")
	prio := int32(5000)
	pod.Spec.Priority = &prio
	cs, st := f.preFilter(t, pod)
	if !st.IsSuccess() {
		t.Fatalf("PreFilter = %v, want Success", st)
	}
	if diff := cmp.Diff(map[string]string{"n1": ok, "n2": ok, "n3": ok}, f.filter(t, cs, pod)); diff != "" {
		t.Errorf("Filter (-want +got):\n%s", diff)
	}
	ctx := context.Background()
	master := redis("cache-0-master", "master", "0", 100, "n1")
	other := ls.PlainPod(ns, "batch")
	other.Spec.NodeName = "n2"
	clone := cs.Clone()
	for _, step := range []struct {
		name string
		do   func() *fwk.Status
		want map[string]string
	}{
		{"a master taken off n1", func() *fwk.Status { return f.pl.RemovePod(ctx, clone, pod, podInfo(t, master), f.nodes["n1"]) },
			map[string]string{"n1": unresolvable, "n2": ok, "n3": ok}},
		{"a pod the policy does not protect taken off n2", func() *fwk.Status { return f.pl.RemovePod(ctx, clone, pod, podInfo(t, other), f.nodes["n2"]) },
			map[string]string{"n1": unresolvable, "n2": ok, "n3": ok}},
		{"the master reprieved", func() *fwk.Status { return f.pl.AddPod(ctx, clone, pod, podInfo(t, master), f.nodes["n1"]) },
			map[string]string{"n1": ok, "n2": ok, "n3": ok}},
	} {
		t.Run(step.name, func(t *testing.T) {
			if st := step.do(); !st.IsSuccess() {
				t.Fatalf("= %v", st)
			}
			if diff := cmp.Diff(step.want, f.filter(t, clone, pod)); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}
