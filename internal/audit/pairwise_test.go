package audit

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/regosched/regosched/internal/policy"
)

// pairwisePolicy has no claims: its hard rules are a Rego conflicts rule,
// one of which names no peer, and it fails at run time on a pod labelled
// boom=true.
func pairwisePolicy(t *testing.T) *policy.Policy {
	t.Helper()
	b, err := policy.LoadFS(fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""
`)},
		"regosched/filter.rego": {Data: []byte(`package regosched.filter

conflicts contains {"node": peer.node, "rule": "exclusive", "reason": sprintf("%s is exclusive", [peer.name]), "peer": peer.uid} if {
	input.pod.labels.exclusive == "true"
	some peer in input.peers
	peer.labels.exclusive == "true"
}

conflicts contains {"node": peer.node, "rule": "reserved", "reason": "the pod wants its node alone"} if {
	input.pod.labels.reserved == "true"
	some peer in input.peers
}

conflicts contains {"node": "node-1", "rule": "boom", "reason": "never"} if boom == 0

boom := 1 if input.pod.labels.boom == "true"

boom := 2 if input.pod.labels.boom == "true"
`)},
		"regosched/prioritize.rego": {Data: []byte(`package regosched.prioritize

penalties := set()
`)},
	}, "pairwise")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestPairwise audits with a policy's conflicts rule: a rule that names no
// peer gives a violation of one pod; a pod the policy fails on is skipped,
// and what was known of it is not announced again once it is judged again.
func TestPairwise(t *testing.T) {
	app := func(name string, more ...string) map[string]string {
		l := map[string]string{"app": name}
		for i := 0; i < len(more); i += 2 {
			l[more[i]] = more[i+1]
		}
		return l
	}
	c0 := bound("ns", "c-0", "node-3", app("c", "reserved", "true"))
	pol := pairwisePolicy(t)
	f := newFixtureWith(t, pol, append(nodes("node-1", "node-2", "node-3"),
		bound("ns", "a-0", "node-1", app("a", "exclusive", "true")),
		bound("ns", "a-1", "node-1", app("a", "exclusive", "true")),
		bound("ns", "a-2", "node-2", app("a", "exclusive", "true")),
		c0,
		bound("ns", "c-1", "node-3", app("c")),
	)...)

	exclusive := Violation{Rule: "exclusive", Namespace: "ns", Node: "node-1", Pods: []string{"ns/a-0", "ns/a-1"}, Reason: "a-1 is exclusive"}
	reserved := Violation{Rule: "reserved", Namespace: "ns", Node: "node-3", Pods: []string{"ns/c-0"}, Reason: "the pod wants its node alone"}
	got := f.run(t)
	want := Report{Violations: []Violation{exclusive, reserved}, PolicyRevision: pol.Revision(), Pods: 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first pass (-want +got):\n%s", diff)
	}
	wantEvents := []event{
		{Regarding: "ns/a-0", Related: "ns/a-1", Type: "Warning", Reason: EventReason, Action: EventAction("exclusive"),
			Note: "hard placement rule exclusive is broken on node node-1 by this pod and ns/a-1: a-1 is exclusive"},
		{Regarding: "ns/a-1", Related: "ns/a-0", Type: "Warning", Reason: EventReason, Action: EventAction("exclusive"),
			Note: "hard placement rule exclusive is broken on node node-1 by this pod and ns/a-0: a-0 is exclusive"},
		{Regarding: "ns/c-0", Type: "Warning", Reason: EventReason, Action: EventAction("reserved"),
			Note: "hard placement rule reserved is broken on node node-3 by this pod: the pod wants its node alone"},
	}
	if diff := cmp.Diff(wantEvents, f.recorder.take()); diff != "" {
		t.Errorf("first pass events (-want +got):\n%s", diff)
	}

	c0.Labels = app("c", "reserved", "true", "boom", "true")
	f.apply(t, c0)
	got = f.run(t)
	want = Report{Violations: []Violation{exclusive}, PolicyRevision: pol.Revision(), Pods: 5, Skipped: []string{"ns/c-0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pass with a failing pod (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(f.auditor.runs.WithLabelValues("partial")); got != 1 {
		t.Errorf("regosched_audit_runs_total{result=partial} = %v, want 1", got)
	}

	c0.Labels = app("c", "reserved", "true")
	f.apply(t, c0)
	got = f.run(t)
	want = Report{Violations: []Violation{exclusive, reserved}, PolicyRevision: pol.Revision(), Pods: 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pass once judged again (-want +got):\n%s", diff)
	}
	if events := f.recorder.take(); len(events) > 0 {
		t.Errorf("events of violations known before = %v, want none", events)
	}
}
