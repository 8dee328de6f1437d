package audit

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// customPolicy is a claims policy of its own, not the default's workloads:
// exclusive pods separate from each other, a reserved pod separates from
// every member of its app (a rule one pod of the pair holds), and judging
// a pod labelled boom=true fails at run time.
func customPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	return loadFS(t, fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""

boom := 1 if input.pod.labels.boom == "true"

boom := 2 if input.pod.labels.boom == "true"
`)},
		"regosched/claims.rego": {Data: []byte(`package regosched.claims

import data.regosched.boom

marks["member"] := sprintf("{pod} is of app %s", [input.pod.labels.app])

marks["exclusive"] := "{pod} is exclusive" if input.pod.labels.exclusive == "true"

separate contains {"mark": "exclusive", "rule": "exclusive"} if input.pod.labels.exclusive == "true"

separate contains {"mark": "member", "rule": "reserved"} if input.pod.labels.reserved == "true"

separate contains {"mark": "member", "rule": "boom"} if boom == 0
`)},
	}, "custom")
}

// TestCustomPolicy audits under a policy's own claims: a rule both pods
// hold is one violation with a reason for each, a rule one pod holds is one
// violation with that pod's reason; a pod the policy fails on is skipped,
// and what was known of it is not announced again once it is judged again.
func TestCustomPolicy(t *testing.T) {
	app := func(name string, more ...string) map[string]string {
		l := map[string]string{"app": name}
		for i := 0; i < len(more); i += 2 {
			l[more[i]] = more[i+1]
		}
		return l
	}
	// The reserved pod sorts second: the violation's reason is still its own.
	c1 := fixture.MakePod().Namespace("ns").Name("c-1").UID("uid-ns-c-1").Labels(app("c", "reserved", "true")).Node("node-3").Obj()
	pol := customPolicy(t)
	f := newHarnessWith(t, pol, append(nodes("node-1", "node-2", "node-3"),
		fixture.MakePod().Namespace("ns").Name("a-0").UID("uid-ns-a-0").Labels(app("a", "exclusive", "true")).Node("node-1").Obj(),
		fixture.MakePod().Namespace("ns").Name("a-1").UID("uid-ns-a-1").Labels(app("a", "exclusive", "true")).Node("node-1").Obj(),
		fixture.MakePod().Namespace("ns").Name("a-2").UID("uid-ns-a-2").Labels(app("a", "exclusive", "true")).Node("node-2").Obj(),
		fixture.MakePod().Namespace("ns").Name("c-0").UID("uid-ns-c-0").Labels(app("c")).Node("node-3").Obj(),
		c1,
	)...)

	exclusive := Violation{Rule: "exclusive", Namespace: "ns", Node: "node-1", Pods: []string{"ns/a-0", "ns/a-1"}, Reason: "ns/a-1 is exclusive"}
	reserved := Violation{Rule: "reserved", Namespace: "ns", Node: "node-3", Pods: []string{"ns/c-0", "ns/c-1"}, Reason: "ns/c-0 is of app c"}
	got := f.run(t)
	want := Report{Violations: []Violation{exclusive, reserved}, PolicyRevision: pol.Revision(), Pods: 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first pass (-want +got):\n%s", diff)
	}
	wantEvents := []event{
		{Regarding: "ns/a-0", Related: "ns/a-1", Type: "Warning", Reason: EventReason, Action: EventAction("exclusive"),
			Note: "hard placement rule exclusive is broken on node node-1 by this pod and ns/a-1: ns/a-1 is exclusive"},
		{Regarding: "ns/a-1", Related: "ns/a-0", Type: "Warning", Reason: EventReason, Action: EventAction("exclusive"),
			Note: "hard placement rule exclusive is broken on node node-1 by this pod and ns/a-0: ns/a-0 is exclusive"},
		{Regarding: "ns/c-0", Related: "ns/c-1", Type: "Warning", Reason: EventReason, Action: EventAction("reserved"),
			Note: "hard placement rule reserved is broken on node node-3 by this pod and ns/c-1"},
		{Regarding: "ns/c-1", Related: "ns/c-0", Type: "Warning", Reason: EventReason, Action: EventAction("reserved"),
			Note: "hard placement rule reserved is broken on node node-3 by this pod and ns/c-0: ns/c-0 is of app c"},
	}
	if diff := cmp.Diff(wantEvents, f.recorder.take()); diff != "" {
		t.Errorf("first pass events (-want +got):\n%s", diff)
	}

	c1.Labels = app("c", "reserved", "true", "boom", "true")
	f.apply(t, c1)
	got = f.run(t)
	want = Report{Violations: []Violation{exclusive}, PolicyRevision: pol.Revision(), Pods: 5, Skipped: []string{"ns/c-1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pass with a failing pod (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(f.auditor.runs.WithLabelValues("partial")); got != 1 {
		t.Errorf("regosched_audit_runs_total{result=partial} = %v, want 1", got)
	}

	c1.Labels = app("c", "reserved", "true")
	f.apply(t, c1)
	got = f.run(t)
	want = Report{Violations: []Violation{exclusive, reserved}, PolicyRevision: pol.Revision(), Pods: 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pass once judged again (-want +got):\n%s", diff)
	}
	if events := f.recorder.take(); len(events) > 0 {
		t.Errorf("events of violations known before = %v, want none", events)
	}
}
