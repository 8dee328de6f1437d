package deploytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
)

// policyData as the chart renders it is data regosched accepts: the
// examples of values.yaml and README.md merged into the embedded policy
// compile and pass its data checks (rego/regosched/validate.rego), and a
// misspelt key is refused, so the check does look at the overlay.
func TestChartPolicyDataLoads(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name, policyData, wantErr string
	}{
		{
			name: "values.yaml example: a Redis label scheme of your own",
			policyData: `{"workloads":{"my-redis":{"kind":"redis","match_labels":{"app":"my-redis"},"match_exists":[],"cluster_label":"release",
				"roles":{"master":[{"role":"master"}],"replica":[{"role":"replica"}]},"protected_roles":["master"],
				"separate":[{"name":"my-redis-masters","role":"master","peer_role":"master","scope":"cluster"}]}}}`,
		},
		{
			name:       "README.md example: a weight, a preset dropped",
			policyData: `{"weights":{"node_spread":2},"workloads":{"bitnami-elasticsearch":null}}`,
		},
		{
			name:       "misspelt key",
			policyData: `{"weigths":{"node_spread":2}}`, //nolint:misspell // misspelt on purpose
			wantErr:    "weigths",                       //nolint:misspell // misspelt on purpose
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compact := strings.Join(strings.Fields(tt.policyData), "")
			objs := chartObjects(t, root, Render{SetJSON: []string{"policyData=" + compact}})
			cm := find(objs, "ConfigMap regosched-system/regosched-policy-data")
			if cm == nil {
				t.Fatal("no ConfigMap regosched-policy-data")
			}
			file := filepath.Join(t.TempDir(), "data.json")
			if err := os.WriteFile(file, []byte(dig(cm, "data")["data.json"].(string)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := bundles.Options{DataFile: file}.LoadFS(t.Context(), regosched.DefaultPolicy(), bundles.EmbeddedName)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("the embedded policy with this policyData: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one naming %q", err, tt.wantErr)
			}
		})
	}
}
