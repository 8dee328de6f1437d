package repair

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/plumbing/output"
)

func TestRender(t *testing.T) {
	v := audit.Violation{Rule: "redis-masters", Namespace: "cache", Node: "node-1", Pods: []string{"cache/a", "cache/b"}, Reason: "r"}
	report := audit.Report{Violations: []audit.Violation{v}, PolicyRevision: "rev", Pods: 6}
	steps := []Step{{Violation: v, Cluster: "c", Action: Failover, Target: "cache/c", Why: "safe"}}
	t.Run("table", func(t *testing.T) {
		var b strings.Builder
		if err := Render(&b, report, steps, output.Table); err != nil {
			t.Fatal(err)
		}
		want := `RULE           NAMESPACE  NODE    PODS  REASON
redis-masters  cache      node-1  a,b   r
1 violation among 6 bound pods, policy revision rev

REPAIR    RULE           PODS             TARGET   WHY
failover  redis-masters  cache/a,cache/b  cache/c  safe
`
		if diff := cmp.Diff(want, b.String()); diff != "" {
			t.Errorf("table (-want +got):\n%s", diff)
		}
	})
	t.Run("json", func(t *testing.T) {
		var b strings.Builder
		if err := Render(&b, audit.Report{}, nil, output.JSON); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]any{}, got["repairs"]); diff != "" {
			t.Errorf("repairs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]any{}, got["violations"]); diff != "" {
			t.Errorf("violations (-want +got):\n%s", diff)
		}
	})
}
