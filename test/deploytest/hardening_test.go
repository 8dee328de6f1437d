package deploytest

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// policySpec returns the spec of ValidatingAdmissionPolicy name, or nil.
func policySpec(objs []Object, name string) map[string]any {
	o := find(objs, "ValidatingAdmissionPolicy "+name)
	if o == nil {
		return nil
	}
	return dig(o, "spec")
}

// fieldOf returns field (name, expression, ...) of each element of a list
// of the policy spec (variables, validations).
func fieldOf(spec map[string]any, list, field string) []string {
	var out []string
	l, _ := spec[list].([]any)
	for _, e := range l {
		s, _ := e.(map[string]any)[field].(string)
		out = append(out, s)
	}
	return out
}

// The cert-roll admission policy, of the chart and of deploy/tls, compares
// the scheduler's whole Deployment before and after a patch by regosched,
// less the certificate annotation and what the API server rewrites: one
// rule, no list of fields that a new one (replicas, paused, strategy were
// such) would slip past.
func TestCertRollPolicyComparesWholeObjects(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name          string
		objs          func(t *testing.T) []Object
		ns, scheduler string
		policy        string
	}{
		{
			name: "chart tls.enabled",
			objs: func(t *testing.T) []Object { return chartObjects(t, root, Render{Set: []string{"tls.enabled=true"}}) },
			ns:   "regosched-system", scheduler: "regosched-scheduler", policy: "regosched-scheduler-patch",
		},
		{
			name: "chart cert-manager, release blue",
			objs: func(t *testing.T) []Object {
				return chartObjects(t, root, Render{Release: "blue", Namespace: "sched", Set: []string{"tls.certManager.enabled=true"}, APIVersions: CRDAPIVersions})
			},
			ns: "sched", scheduler: "blue-regosched-scheduler", policy: "blue-regosched-scheduler-patch",
		},
		{
			name: "deploy/tls",
			objs: func(t *testing.T) []Object { return kustomizeObjects(t, root, "deploy/tls") },
			ns:   "regosched-system", scheduler: "regosched-scheduler", policy: "regosched-scheduler-patch",
		},
		{
			name: "deploy/tls/ha",
			objs: func(t *testing.T) []Object { return kustomizeObjects(t, root, "deploy/tls/ha") },
			ns:   "regosched-system", scheduler: "regosched-scheduler", policy: "regosched-scheduler-patch",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := policySpec(tt.objs(t), tt.policy)
			if spec == nil {
				t.Fatalf("no ValidatingAdmissionPolicy %s", tt.policy)
			}
			wantValidations := []string{
				"request.namespace == '" + tt.ns + "' && object.metadata.name == '" + tt.scheduler + "'",
				"variables.pinned[0] == variables.pinned[1]",
			}
			if diff := cmp.Diff(wantValidations, fieldOf(spec, "validations", "expression")); diff != "" {
				t.Errorf("validations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"annotation", "pinned", "changed"}, fieldOf(spec, "variables", "name")); diff != "" {
				t.Errorf("variables (-want +got):\n%s", diff)
			}
			vars := fieldOf(spec, "variables", "expression")
			if len(vars) != 3 {
				t.Fatalf("variables %q", vars)
			}
			if vars[0] != "'regosched.io/client-cert-sha256'" {
				t.Errorf("annotation = %s", vars[0])
			}
			// Both whole objects, transformed alike.
			if pinned := vars[1]; !strings.HasPrefix(pinned, "[oldObject, object].map(d, d.transformMap(") {
				t.Errorf("pinned does not transform both whole objects:\n%s", pinned)
			}
			// Fields of the spec are never named, so none is left out.
			for _, field := range []string{"replicas", "paused", "strategy", "selector", "minReadySeconds", "progressDeadlineSeconds", "revisionHistoryLimit", "labels", "finalizers"} {
				if strings.Contains(vars[1], field) {
					t.Errorf("pinned names %s:\n%s", field, vars[1])
				}
			}
			msg := fieldOf(spec, "validations", "messageExpression")
			if len(msg) != 2 || !strings.Contains(msg[1], "regosched.io/client-cert-sha256 of Deployment "+tt.ns+"/"+tt.scheduler) {
				t.Errorf("messageExpressions %q", msg)
			}
		})
	}
}

// wantDryRunEvictions is admission policy <fullname>-dry-run-evictions'
// spec for ServiceAccount ns/name.
func wantDryRunEvictions(ns, name string) map[string]any {
	return map[string]any{
		"failurePolicy": "Fail",
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"*"}, "operations": []any{"CREATE"}, "resources": []any{"pods/eviction"},
		}}},
		"matchConditions": []any{map[string]any{
			"name":       "regosched-service-account",
			"expression": "request.userInfo.username == 'system:serviceaccount:" + ns + ":" + name + "'",
		}},
		"validations": []any{map[string]any{
			"expression": "request.dryRun == true || (has(object.deleteOptions) && has(object.deleteOptions.dryRun) && object.deleteOptions.dryRun == ['All'])",
			"message":    "regosched runs with --repair=plan and may only dry-run evictions (dryRun All), not evict pods",
		}},
	}
}

var evictRule = map[string]any{"apiGroups": []any{""}, "resources": []any{"pods/eviction"}, "verbs": []any{"create"}}

// checkEvictions checks the grant of pods/eviction of ClusterRole fullname
// and, with plan, admission policy fullname-dry-run-evictions and its
// binding, which keep the grant to dry runs; without plan, neither.
func checkEvictions(t *testing.T, objs []Object, ns, fullname string, grant, plan bool) {
	t.Helper()
	if got := slices.ContainsFunc(rules(t, objs, "ClusterRole "+fullname), func(r any) bool { return cmp.Equal(r, evictRule) }); got != grant {
		t.Errorf("ClusterRole %s creates pods/eviction: %v, want %v", fullname, got, grant)
	}
	name := fullname + "-dry-run-evictions"
	spec := policySpec(objs, name)
	binding := find(objs, "ValidatingAdmissionPolicyBinding "+name)
	if !plan {
		if spec != nil || binding != nil {
			t.Errorf("ValidatingAdmissionPolicy %s (%v) or its binding (%v) rendered, want neither", name, spec != nil, binding != nil)
		}
		return
	}
	if spec == nil {
		t.Fatalf("no ValidatingAdmissionPolicy %s", name)
	}
	if diff := cmp.Diff(wantDryRunEvictions(ns, fullname), spec); diff != "" {
		t.Errorf("%s spec (-want +got):\n%s", name, diff)
	}
	wantBinding := map[string]any{"policyName": name, "validationActions": []any{"Deny"}}
	if binding == nil {
		t.Fatalf("no ValidatingAdmissionPolicyBinding %s", name)
	}
	if diff := cmp.Diff(wantBinding, dig(binding, "spec")); diff != "" {
		t.Errorf("binding %s (-want +got):\n%s", name, diff)
	}
}

// repair.mode plan grants create on pods/eviction, which RBAC cannot keep
// to dry runs, so the chart adds an admission policy that refuses the
// ServiceAccount's real evictions; repair.mode on grants real ones (no
// policy), off none at all. The policy does not follow
// admissionPolicy.enabled: plan mode depends on it.
func TestChartRepairPlanEvictions(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name        string
		render      Render
		grant, plan bool
	}{
		{name: "default: plan", render: Render{}, grant: true, plan: true},
		{name: "plan", render: Render{Set: []string{"repair.mode=plan"}}, grant: true, plan: true},
		{name: "plan, release blue", render: Render{Release: "blue", Namespace: "sched"}, grant: true, plan: true},
		{name: "plan without admission policies", render: Render{Set: []string{"admissionPolicy.enabled=false"}}, grant: true, plan: true},
		{name: "plan, mode plugin", render: Render{Set: []string{"mode=plugin"}}, grant: true, plan: true},
		{name: "plan, replicas=2", render: Render{Set: []string{"replicas=2"}}, grant: true, plan: true},
		{name: "on", render: Render{Set: []string{"repair.mode=on"}}, grant: true},
		{name: "YAML true", render: Render{SetJSON: []string{"repair.mode=true"}}, grant: true},
		{name: "off", render: Render{Set: []string{"repair.mode=off"}}},
		{name: "YAML false", render: Render{SetJSON: []string{"repair.mode=false"}}},
		{name: "off without live roles", render: Render{Set: []string{"repair.mode=off", "redisRoles.enabled=false"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lint(t, root, tt.render)
			objs := chartObjects(t, root, tt.render)
			ns, fullname := names(tt.render)
			checkEvictions(t, objs, ns, fullname, tt.grant, tt.plan)
		})
	}
}

// deploy/ runs --repair=plan in every kustomization, so each has the
// dry-run policy next to its grant of pods/eviction.
func TestDeployRepairPlanEvictions(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	for _, dir := range []string{"deploy", "deploy/extender", "deploy/ha", "deploy/tls", "deploy/tls/ha"} {
		t.Run(dir, func(t *testing.T) {
			objs := kustomizeObjects(t, root, dir)
			args := container(t, objs, "regosched")["args"].([]any)
			if !slices.Contains(args, any("--repair=plan")) {
				t.Fatalf("%s does not run --repair=plan: %v", dir, args)
			}
			checkEvictions(t, objs, "regosched-system", "regosched", true, true)
		})
	}
}
