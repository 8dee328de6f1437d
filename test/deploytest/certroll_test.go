package deploytest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// With mutual TLS, regosched rolls the scheduler when its client
// certificate Secret changes: serve gets the Secret the scheduler mounts
// and the scheduler's Deployment, a Role grants exactly those two by name,
// and an admission policy keeps its patches of the Deployment to one
// annotation. Nothing of it without TLS, or with the value off.
func TestChartCertRoll(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name   string
		render Render
		roll   bool
		policy bool
	}{
		{name: "no tls", render: Render{}},
		{name: "tls.enabled", render: Render{Set: []string{"tls.enabled=true"}}, roll: true, policy: true},
		{name: "tls.enabled, replicas=2", render: Render{Set: []string{"tls.enabled=true", "replicas=2"}}, roll: true, policy: true},
		{
			name:   "cert-manager, release blue, a Secret of another name",
			render: Render{Release: "blue", Namespace: "sched", Set: []string{"tls.certManager.enabled=true", "tls.clientSecretName=sched-client"}, APIVersions: CRDAPIVersions},
			roll:   true, policy: true,
		},
		{name: "no admission policies", render: Render{Set: []string{"tls.enabled=true", "admissionPolicy.enabled=false"}}, roll: true},
		{name: "rollSchedulerOnRenewal off", render: Render{Set: []string{"tls.enabled=true", "tls.rollSchedulerOnRenewal=false"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lint(t, root, tt.render)
			objs := chartObjects(t, root, tt.render)
			ns, name := names(tt.render)
			sched := name + "-scheduler"
			// The Secret the scheduler reads its client pair from.
			var secret string
			if v, ok := volumes(t, objs, sched)["extender-client-tls"].(map[string]any); ok {
				secret, _ = dig(v, "secret")["secretName"].(string)
			}
			if tt.roll && secret == "" {
				t.Fatalf("Deployment %s mounts no client certificate Secret", sched)
			}

			var got []string
			for _, a := range container(t, objs, name)["args"].([]any) {
				if s := a.(string); strings.HasPrefix(s, "--scheduler-client-secret") || strings.HasPrefix(s, "--scheduler-deployment") {
					got = append(got, s)
				}
			}
			var want []string
			if tt.roll {
				want = []string{"--scheduler-client-secret=" + secret, "--scheduler-deployment=" + sched}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("serve flags (-want +got):\n%s", diff)
			}

			role := find(objs, "Role "+ns+"/"+name+"-cert-roll")
			binding := find(objs, "RoleBinding "+ns+"/"+name+"-cert-roll")
			if (role != nil) != tt.roll || (binding != nil) != tt.roll {
				t.Fatalf("Role and RoleBinding %s-cert-roll: %v, %v; want %v", name, role != nil, binding != nil, tt.roll)
			}
			if tt.roll {
				wantRules := []any{
					map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "resourceNames": []any{secret}, "verbs": []any{"get", "list", "watch"}},
					map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "resourceNames": []any{sched}, "verbs": []any{"get", "patch"}},
				}
				if diff := cmp.Diff(wantRules, role["rules"]); diff != "" {
					t.Errorf("Role rules (-want +got):\n%s", diff)
				}
				wantSubjects := []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": ns}}
				if diff := cmp.Diff(wantSubjects, binding["subjects"]); diff != "" {
					t.Errorf("RoleBinding subjects (-want +got):\n%s", diff)
				}
			}

			policy := find(objs, "ValidatingAdmissionPolicy "+name+"-scheduler-patch")
			if (policy != nil) != tt.policy {
				t.Fatalf("ValidatingAdmissionPolicy %s-scheduler-patch: %v, want %v", name, policy != nil, tt.policy)
			}
			if tt.policy {
				e := expressions(t, objs, name+"-scheduler-patch")
				for _, want := range []string{
					"request.userInfo.username == 'system:serviceaccount:" + ns + ":" + name + "'",
					"request.namespace == '" + ns + "' && object.metadata.name == '" + sched + "'",
					"variables.pinned[0] == variables.pinned[1]",
					"'regosched.io/client-cert-sha256'",
				} {
					if !strings.Contains(e, want) {
						t.Errorf("%s-scheduler-patch lacks %s:\n%s", name, want, e)
					}
				}
				if b := find(objs, "ValidatingAdmissionPolicyBinding "+name+"-scheduler-patch"); b == nil || dig(b, "spec")["policyName"] != name+"-scheduler-patch" {
					t.Errorf("binding of %s-scheduler-patch: %v", name, b)
				}
			}
		})
	}
}
