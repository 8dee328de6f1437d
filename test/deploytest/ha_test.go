package deploytest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// antiAffinity is the preferred pod anti-affinity on the node the chart
// and deploy/ha give a component with more than one replica.
func antiAffinity(release, component string) map[string]any {
	return map[string]any{"podAntiAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
		map[string]any{"weight": float64(100), "podAffinityTerm": map[string]any{
			"topologyKey": "kubernetes.io/hostname",
			"labelSelector": map[string]any{"matchLabels": map[string]any{
				"app.kubernetes.io/name": "regosched", "app.kubernetes.io/instance": release, "app.kubernetes.io/component": component,
			}},
		}},
	}}}
}

// The second scheduler survives its node when it runs more than one
// replica: as many as the extender unless scheduler.replicas says
// otherwise, leader election on a Lease of its own that its Role grants by
// name, a PodDisruptionBudget, and a preference for distinct nodes (both
// components), in either mode.
func TestChartSchedulerHA(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	custom := map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
		map[string]any{"weight": float64(1), "preference": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
		}}},
	}}}
	tests := []struct {
		name              string
		render            Render
		extender, sched   float64 // replicas
		extenderAffinity  any     // nil: none
		schedulerAffinity any
	}{
		{name: "default: one of each", extender: 1, sched: 1},
		{
			name: "replicas=2: two of each", render: Render{Set: []string{"replicas=2"}}, extender: 2, sched: 2,
			extenderAffinity: antiAffinity("regosched", "extender"), schedulerAffinity: antiAffinity("regosched", "scheduler"),
		},
		{
			name: "scheduler.replicas=3 alone", render: Render{Set: []string{"scheduler.replicas=3"}}, extender: 1, sched: 3,
			schedulerAffinity: antiAffinity("regosched", "scheduler"),
		},
		{
			name: "replicas=2, scheduler.replicas=1", render: Render{Set: []string{"replicas=2", "scheduler.replicas=1"}}, extender: 2, sched: 1,
			extenderAffinity: antiAffinity("regosched", "extender"),
		},
		{
			name: "affinity of the user's", extender: 2, sched: 2,
			render: Render{Set: []string{"replicas=2"}, SetJSON: []string{
				`scheduler.affinity={"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists"}]}}]}}`,
			}},
			extenderAffinity: antiAffinity("regosched", "extender"), schedulerAffinity: custom,
		},
		{
			name: "mode plugin, replicas=2", render: Render{Set: []string{"mode=plugin", "replicas=2"}}, extender: 2, sched: 2,
			extenderAffinity: antiAffinity("regosched", "extender"), schedulerAffinity: antiAffinity("regosched", "scheduler"),
		},
		{
			name: "release blue, replicas=2", render: Render{Release: "blue", Namespace: "sched", Set: []string{"replicas=2"}}, extender: 2, sched: 2,
			extenderAffinity: antiAffinity("blue", "extender"), schedulerAffinity: antiAffinity("blue", "scheduler"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lint(t, root, tt.render)
			objs := chartObjects(t, root, tt.render)
			ns, name := names(tt.render)
			sched := name + "-scheduler"
			for _, c := range []struct {
				deployment string
				replicas   float64
				affinity   any
			}{
				{name, tt.extender, tt.extenderAffinity},
				{sched, tt.sched, tt.schedulerAffinity},
			} {
				d := find(objs, "Deployment "+ns+"/"+c.deployment)
				if d == nil {
					t.Fatalf("no Deployment %s/%s", ns, c.deployment)
				}
				if got := dig(d, "spec")["replicas"]; got != c.replicas {
					t.Errorf("%s: replicas %v, want %v", c.deployment, got, c.replicas)
				}
				if diff := cmp.Diff(c.affinity, podSpec(t, objs, c.deployment)["affinity"]); diff != "" {
					t.Errorf("%s: affinity (-want +got):\n%s", c.deployment, diff)
				}
				pdb := find(objs, "PodDisruptionBudget "+ns+"/"+c.deployment)
				if (pdb != nil) != (c.replicas > 1) {
					t.Errorf("%s: PodDisruptionBudget %v with %v replicas", c.deployment, pdb != nil, c.replicas)
				} else if pdb != nil {
					want := map[string]any{"minAvailable": float64(1), "selector": dig(d, "spec", "selector")}
					if diff := cmp.Diff(want, pdb["spec"]); diff != "" {
						t.Errorf("%s: PodDisruptionBudget (-want +got):\n%s", c.deployment, diff)
					}
				}
			}
			// Leader election on the scheduler's own Lease, which its Role
			// grants by name (system:kube-scheduler covers the Lease named
			// kube-scheduler only).
			var cfg schedulerConfiguration
			for _, o := range objs {
				if Key(o) == "ConfigMap "+ns+"/"+sched+"-config" {
					if err := yaml.Unmarshal([]byte(dig(o, "data")["kube-scheduler-config.yaml"].(string)), &cfg); err != nil {
						t.Fatal(err)
					}
				}
			}
			le := cfg.LeaderElection
			if !le.LeaderElect || le.ResourceNamespace != ns || le.ResourceName != sched {
				t.Errorf("leaderElection %+v, want leaderElect on Lease %s/%s", le, ns, sched)
			}
			wantRules := []any{
				map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "resourceNames": []any{sched}, "verbs": []any{"get", "update"}},
				map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "verbs": []any{"create"}},
			}
			if diff := cmp.Diff(wantRules, rules(t, objs, "Role "+ns+"/"+sched+":leader-election")); diff != "" {
				t.Errorf("the scheduler's Lease Role (-want +got):\n%s", diff)
			}
		})
	}
}
