package audit

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/plumbing/output"
)

func TestRender(t *testing.T) {
	two := Report{
		Violations: []Violation{
			{
				Rule: "elasticsearch-data", Namespace: "search", Node: "node-2", Pods: []string{"search/logs-data-0", "search/logs-data-1"},
				Reason: "elasticsearch: data search/logs-data-1 of cluster logs already on this node",
			},
			{
				Rule: "redis-masters", Namespace: "shop", Node: "node-1", Pods: []string{"shop/cache-0", "shop/cache-2"},
				Reason: "redis: master shop/cache-2 of cluster cache already on this node",
			},
		},
		PolicyRevision: "sha256:0123456789abcdef",
		Pods:           12,
	}
	for _, tc := range []struct {
		name   string
		report Report
		format output.Format
		want   string
	}{
		{
			name: "table", report: two, format: output.Table,
			want: `RULE                NAMESPACE  NODE    PODS                     REASON
elasticsearch-data  search     node-2  logs-data-0,logs-data-1  elasticsearch: data search/logs-data-1 of cluster logs already on this node
redis-masters       shop       node-1  cache-0,cache-2          redis: master shop/cache-2 of cluster cache already on this node
2 violations among 12 bound pods, policy revision sha256:0123456789abcdef
`,
		},
		{
			name: "table without violations", format: output.Table,
			report: Report{PolicyRevision: "sha256:0123456789abcdef", Pods: 1},
			want:   "0 violations among 1 bound pod, policy revision sha256:0123456789abcdef\n",
		},
		{
			name: "table with skipped pods", format: output.Table,
			report: Report{PolicyRevision: "r", Skipped: []string{"a/x", "b/y"}, Pods: 2, Violations: []Violation{
				{Rule: "reserved", Namespace: "a", Node: "n", Pods: []string{"b/z"}, Reason: "alone"},
			}},
			want: `RULE      NAMESPACE  NODE  PODS  REASON
reserved  a          n     b/z   alone
1 violation among 2 bound pods, policy revision r
the policy failed to judge 2 pods: a/x, b/y
`,
		},
		{
			name: "json", report: two, format: output.JSON,
			want: `{
  "violations": [
    {
      "rule": "elasticsearch-data",
      "namespace": "search",
      "node": "node-2",
      "pods": [
        "search/logs-data-0",
        "search/logs-data-1"
      ],
      "reason": "elasticsearch: data search/logs-data-1 of cluster logs already on this node"
    },
    {
      "rule": "redis-masters",
      "namespace": "shop",
      "node": "node-1",
      "pods": [
        "shop/cache-0",
        "shop/cache-2"
      ],
      "reason": "redis: master shop/cache-2 of cluster cache already on this node"
    }
  ],
  "policyRevision": "sha256:0123456789abcdef",
  "pods": 12
}
`,
		},
		{
			name: "json without violations", format: output.JSON,
			report: Report{PolicyRevision: "r", Pods: 0},
			want: `{
  "violations": [],
  "policyRevision": "r",
  "pods": 0
}
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Render(&out, tc.report, tc.format); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
		})
	}
}
