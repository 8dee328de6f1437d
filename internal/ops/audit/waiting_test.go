package audit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/regosched/regosched/internal/core/policy"

	"github.com/regosched/regosched/test/fixture"
)

// A Redis pod whose role the roles controller has not read yet has labels
// that are no facts (none, or a role without its shard): its violations
// wait for the read instead of being reported, announced and repaired.
// Pods whose roles are not read live are never held.
func TestWaitingForRoleReads(t *testing.T) {
	master := fixture.MakePod().Namespace("cache").Name("s-0").BitnamiRedisCluster("sessions").
		Label(fixture.LabelRole, "master").Label(fixture.LabelShard, "slot-0").StatefulSet("sts", "sts-uid").Node("node-1").Obj()
	halfLabelled := fixture.MakePod().Namespace("cache").Name("s-1").BitnamiRedisCluster("sessions").
		Label(fixture.LabelRole, "replica").StatefulSet("sts", "sts-uid").Node("node-1").Obj()
	es0 := fixture.MakePod().Namespace("logs").Name("es-0").Elasticsearch("es", "data").Node("node-1").Obj()
	es1 := fixture.MakePod().Namespace("logs").Name("es-1").Elasticsearch("es", "data").Node("node-1").Obj()
	tests := []struct {
		name        string
		checked     func(ns, name string) bool // nil: the CLI
		wantRules   []string
		wantWaiting []string
	}{
		{"the CLI: labels are facts", nil, []string{"elasticsearch-data", "redis-master-replica"}, nil},
		{"the replica not read yet", func(_, name string) bool { return name != "s-1" },
			[]string{"elasticsearch-data"}, []string{"redis-master-replica"}},
		{"nothing read yet: Elasticsearch is no Redis", func(string, string) bool { return false },
			[]string{"elasticsearch-data"}, []string{"redis-master-replica"}},
		{"all read", func(string, string) bool { return true }, []string{"elasticsearch-data", "redis-master-replica"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newHarness(t, append(nodes("node-1"), master, halfLabelled, es0, es1)...)
			f.eventually(t, func() bool { return len(f.cache.Indexed()) == 4 })
			log, _ := logtest.NewNullLogger()
			a, err := New(Config{Cache: f.cache, Policies: func() *policy.Policy { return defaultPolicy(t) }, Log: log, RoleChecked: tc.checked})
			if err != nil {
				t.Fatal(err)
			}
			report, err := a.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			rules := func(vs []Violation) []string {
				var out []string
				for _, v := range vs {
					out = append(out, v.Rule)
				}
				return out
			}
			if diff := cmp.Diff(tc.wantRules, rules(report.Violations)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWaiting, rules(report.Waiting)); diff != "" {
				t.Errorf("waiting (-want +got):\n%s", diff)
			}
		})
	}
}
