package repair

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/regosched/regosched/test/fixture"
)

// Two of a Redis Cluster's three masters in one zone (a failover's doing)
// break its quorum: the repair hands one of them over to a replica whose
// promotion breaks no rule per zone, never the one whose zone already
// holds the third master.
func TestRepairKeepsTheQuorumPerZone(t *testing.T) {
	member := func(name, role, shard, node string) runtime.Object {
		return fixture.MakePod().Namespace("cache").Name(name).BitnamiRedisCluster("sessions").
			Label(fixture.LabelRole, role).Label(fixture.LabelShard, shard).StatefulSet("sts", "sts-uid").Node(node).Obj()
	}
	f := newHarness(t,
		fixture.MakeNode().Name("a1").Zone("zone-a").Obj(), fixture.MakeNode().Name("a2").Zone("zone-a").Obj(),
		fixture.MakeNode().Name("b1").Zone("zone-b").Obj(), fixture.MakeNode().Name("c1").Zone("zone-c").Obj(),
		member("m0", "master", "slot-0", "a1"),
		member("m1", "master", "slot-5461", "a2"),
		member("m2", "master", "slot-10923", "c1"),
		// m0's replica shares zone-c with m2: promoted, it would make zone-c
		// hold two masters in turn. m1's replica is alone in zone-b.
		member("r0", "replica", "slot-0", "c1"),
		member("r1", "replica", "slot-5461", "b1"),
		member("r2", "replica", "slot-10923", "b1"),
	)
	report, err := f.auditor.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Violations) != 1 || report.Violations[0].Rule != "redis-masters-quorum" {
		t.Fatalf("violations = %+v, want the quorum of sessions in zone-a", report.Violations)
	}
	pol := f.repairer(t, Plan).cfg.Policies()
	steps := Steps(context.Background(), pol, f.cache, f.client, nil, DefaultMaxLagBytes, report)
	if len(steps) != 1 || steps[0].Action != Failover || steps[0].Target != "cache/r1" {
		t.Fatalf("steps = %+v, want a failover to cache/r1", steps)
	}
	if !strings.Contains(steps[0].Why, "breaks no hard rule") {
		t.Errorf("why = %q", steps[0].Why)
	}
}
