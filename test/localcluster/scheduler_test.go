package localcluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestSchedulerConfig(t *testing.T) {
	const deployed = `# The scheduler as deployed in a real cluster.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceName: regosched
profiles:
  - schedulerName: regosched
extenders:
  - urlPrefix: http://regosched.kube-system.svc:8080/scheduler
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: 1
    nodeCacheCapable: true
    ignorable: false
`
	tests := []struct {
		name        string
		base        string
		kubeconfig  string
		extenderURL string
		want        map[string]any
		wantErr     string
	}{
		{
			name:        "deployed config",
			base:        deployed,
			kubeconfig:  "/tmp/admin.kubeconfig",
			extenderURL: "http://127.0.0.1:4321/scheduler",
			want: map[string]any{
				"apiVersion":       "kubescheduler.config.k8s.io/v1",
				"kind":             "KubeSchedulerConfiguration",
				"clientConnection": map[string]any{"kubeconfig": "/tmp/admin.kubeconfig"},
				"leaderElection":   map[string]any{"leaderElect": false, "resourceName": "regosched"},
				"profiles":         []any{map[string]any{"schedulerName": "regosched"}},
				"extenders": []any{map[string]any{
					"urlPrefix":        "http://127.0.0.1:4321/scheduler",
					"filterVerb":       "filter",
					"prioritizeVerb":   "prioritize",
					"weight":           float64(1),
					"nodeCacheCapable": true,
					"ignorable":        false,
				}},
			},
		},
		{
			name: "existing client connection is kept",
			base: `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 100
  kubeconfig: /etc/kubernetes/scheduler.conf
`,
			kubeconfig: "/k",
			want: map[string]any{
				"apiVersion":       "kubescheduler.config.k8s.io/v1",
				"kind":             "KubeSchedulerConfiguration",
				"clientConnection": map[string]any{"kubeconfig": "/k", "qps": float64(100)},
				"leaderElection":   map[string]any{"leaderElect": false},
			},
		},
		{
			name: "no extender URL leaves extenders alone",
			base: `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: http://elsewhere
`,
			kubeconfig: "/k",
			want: map[string]any{
				"apiVersion":       "kubescheduler.config.k8s.io/v1",
				"kind":             "KubeSchedulerConfiguration",
				"clientConnection": map[string]any{"kubeconfig": "/k"},
				"leaderElection":   map[string]any{"leaderElect": false},
				"extenders":        []any{map[string]any{"urlPrefix": "http://elsewhere"}},
			},
		},
		{
			name:        "extender URL without extenders",
			base:        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
			kubeconfig:  "/k",
			extenderURL: "http://127.0.0.1:1",
			wantErr:     "no extenders configured",
		},
		{
			name:       "wrong kind",
			base:       "apiVersion: v1\nkind: ConfigMap\n",
			kubeconfig: "/k",
			wantErr:    "want KubeSchedulerConfiguration",
		},
		{
			name:       "leaderElection not a mapping",
			base:       "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: true\n",
			kubeconfig: "/k",
			wantErr:    "leaderElection is bool",
		},
		{
			name:       "not YAML",
			base:       "kind: [",
			kubeconfig: "/k",
			wantErr:    "scheduler config",
		},
		{
			name:    "no kubeconfig",
			base:    deployed,
			wantErr: "empty kubeconfig",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := SchedulerConfig([]byte(tt.base), tt.kubeconfig, tt.extenderURL)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SchedulerConfig() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SchedulerConfig() error = %v", err)
			}
			var got map[string]any
			if err := yaml.Unmarshal(out, &got); err != nil {
				t.Fatalf("output is not YAML: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SchedulerConfig() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSchedulerConfigDeployedFile adapts the real deployment's scheduler
// configuration, so that a change to that file which SchedulerConfig cannot
// handle shows up without starting a cluster.
func TestSchedulerConfigDeployedFile(t *testing.T) {
	root, err := FindRepoRoot()
	if err != nil {
		t.Skipf("no repository: %v", err)
	}
	base, err := os.ReadFile(filepath.Join(root, "deploy", "scheduler", "kube-scheduler-config.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("deploy/scheduler/kube-scheduler-config.yaml does not exist yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := SchedulerConfig(base, "/k", "http://127.0.0.1:1/x")
	if err != nil {
		t.Fatalf("SchedulerConfig() error = %v", err)
	}
	var got struct {
		ClientConnection struct{ Kubeconfig string }
		LeaderElection   struct{ LeaderElect *bool }
		Extenders        []struct{ URLPrefix string }
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, out)
	}
	if got.ClientConnection.Kubeconfig != "/k" {
		t.Errorf("clientConnection.kubeconfig = %q, want /k", got.ClientConnection.Kubeconfig)
	}
	if le := got.LeaderElection.LeaderElect; le == nil || *le {
		t.Errorf("leaderElection.leaderElect is not false:\n%s", out)
	}
	if len(got.Extenders) == 0 {
		t.Errorf("no extenders:\n%s", out)
	}
	for i, e := range got.Extenders {
		if e.URLPrefix != "http://127.0.0.1:1/x" {
			t.Errorf("extenders[%d].urlPrefix = %q, want http://127.0.0.1:1/x", i, e.URLPrefix)
		}
	}
}
