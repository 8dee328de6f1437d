package deploytest

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rules returns the rules of a Role or ClusterRole.
func rules(t *testing.T, objs []Object, key string) []any {
	t.Helper()
	o := find(objs, key)
	if o == nil {
		t.Fatalf("no %s", key)
	}
	r, _ := o["rules"].([]any)
	return r
}

// expressions returns every CEL expression of a ValidatingAdmissionPolicy:
// match conditions, variables, validations and their messages.
func expressions(t *testing.T, objs []Object, name string) string {
	t.Helper()
	o := find(objs, "ValidatingAdmissionPolicy "+name)
	if o == nil {
		t.Fatalf("no ValidatingAdmissionPolicy %s", name)
	}
	var out []string
	for _, field := range []string{"matchConditions", "variables", "validations"} {
		list, _ := dig(o, "spec")[field].([]any)
		for _, e := range list {
			m := e.(map[string]any)
			for _, k := range []string{"expression", "messageExpression", "message"} {
				if s, ok := m[k].(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return strings.Join(out, "\n")
}

// A release other than "regosched", in another namespace, grants and
// narrows its own ServiceAccount, by its own Lease and ConfigMap names
// (of Redis roles, and of repairs with repair.mode plan, the default); the
// admission policies name that account, that namespace and those objects.
func TestChartAccessFollowsTheRelease(t *testing.T) {
	skipShort(t)
	objs := chartObjects(t, repoRoot(t), Render{Release: "blue", Namespace: "sched"})
	wantRole := []any{
		map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "resourceNames": []any{"blue-regosched"}, "verbs": []any{"get", "update"}},
		map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "verbs": []any{"create"}},
		map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{"blue-regosched-redis-roles"}, "verbs": []any{"get", "update"}},
		map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{"blue-regosched-repairs"}, "verbs": []any{"get", "update"}},
		map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"create"}},
	}
	if diff := cmp.Diff(wantRole, rules(t, objs, "Role sched/blue-regosched-leader-election")); diff != "" {
		t.Errorf("Role rules (-want +got):\n%s", diff)
	}
	for _, name := range []string{"blue-regosched-pod-patch", "blue-regosched-own-objects", "blue-regosched-events"} {
		e := expressions(t, objs, name)
		if !strings.Contains(e, "request.userInfo.username == 'system:serviceaccount:sched:blue-regosched'") {
			t.Errorf("%s does not match ServiceAccount sched/blue-regosched:\n%s", name, e)
		}
		b := find(objs, "ValidatingAdmissionPolicyBinding "+name)
		if b == nil || dig(b, "spec")["policyName"] != name {
			t.Errorf("binding of %s: %v", name, b)
		}
		if strings.Contains(e, "regosched-system") {
			t.Errorf("%s names regosched-system:\n%s", name, e)
		}
	}
	own := expressions(t, objs, "blue-regosched-own-objects")
	for _, want := range []string{"request.namespace == 'sched'", "'blue-regosched'", "'blue-regosched-redis-roles'", "'blue-regosched-repairs'"} {
		if !strings.Contains(own, want) {
			t.Errorf("blue-regosched-own-objects lacks %s:\n%s", want, own)
		}
	}
	if pod := expressions(t, objs, "blue-regosched-pod-patch"); !strings.Contains(pod, "request.namespace == 'sched'") {
		t.Errorf("blue-regosched-pod-patch does not keep the leader label to namespace sched:\n%s", pod)
	}
}

// Which values grant what: patching pods cluster-wide only for live Redis
// roles; the leader label alone is patched in the release namespace; no
// admission policies when they are turned off, but for repair.mode plan's.
func TestChartAccessValues(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	podPatch := map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"patch"}}
	// policies counts admission policies and bindings: 3 and 3, and with
	// repair.mode plan (the default) the dry-run eviction policy and its
	// binding, which admissionPolicy.enabled does not turn off.
	tests := []struct {
		name                         string
		set                          []string
		clusterPatch, namespacePatch bool
		policies                     int
	}{
		{"defaults", nil, true, false, 8},
		{"no live roles", []string{"redisRoles.enabled=false"}, false, false, 8},
		{"leader election without live roles", []string{"redisRoles.enabled=false", "replicas=2"}, false, true, 8},
		{"no admission policies", []string{"admissionPolicy.enabled=false"}, true, false, 2},
		{"no admission policies, repair on", []string{"admissionPolicy.enabled=false", "repair.mode=on"}, true, false, 0},
		{"repair on", []string{"repair.mode=on"}, true, false, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Render{Set: tt.set}
			lint(t, root, r)
			objs := chartObjects(t, root, r)
			if got := slices.ContainsFunc(rules(t, objs, "ClusterRole regosched"), func(r any) bool { return cmp.Equal(r, podPatch) }); got != tt.clusterPatch {
				t.Errorf("ClusterRole patches pods: %v, want %v", got, tt.clusterPatch)
			}
			if got := slices.ContainsFunc(rules(t, objs, "Role regosched-system/regosched-leader-election"), func(r any) bool { return cmp.Equal(r, podPatch) }); got != tt.namespacePatch {
				t.Errorf("Role patches pods: %v, want %v", got, tt.namespacePatch)
			}
			n := 0
			for _, o := range objs {
				if k, _ := o["kind"].(string); strings.HasPrefix(k, "ValidatingAdmissionPolicy") {
					n++
				}
			}
			if n != tt.policies {
				t.Errorf("%d admission policies and bindings, want %d", n, tt.policies)
			}
		})
	}
}

// The extender accepts the client certificate the chart issues the
// scheduler (its CN), or the names set; and the NetworkPolicy opens the
// health port to the namespaces of networkPolicy.health alone.
func TestChartAllowedClientsAndHealthPort(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	t.Run("allowed client names", func(t *testing.T) {
		tests := []struct {
			name    string
			render  Render
			wantArg string
		}{
			{"cert-manager, release blue", Render{Release: "blue", Set: []string{"tls.certManager.enabled=true"}, APIVersions: CRDAPIVersions}, "--tls-allowed-client-names=blue-regosched-scheduler"},
			{"names set", Render{Set: []string{"tls.enabled=true", "tls.allowedClientNames={sched-a,sched-b.example.com}"}}, "--tls-allowed-client-names=sched-a,sched-b.example.com"},
			{"no tls", Render{Set: []string{"tls.allowedClientNames={sched-a}"}}, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				lint(t, root, tt.render)
				objs := chartObjects(t, root, tt.render)
				name := "regosched"
				if tt.render.Release != "" {
					name = tt.render.Release + "-regosched"
				}
				var got []any
				for _, a := range container(t, objs, name)["args"].([]any) {
					if strings.HasPrefix(a.(string), "--tls-allowed-client-names") {
						got = append(got, a)
					}
				}
				var want []any
				if tt.wantArg != "" {
					want = []any{tt.wantArg}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("args (-want +got):\n%s", diff)
				}
				// The default is the CN of the chart's client Certificate.
				for _, o := range objs {
					if o["kind"] == "Certificate" && strings.HasSuffix(dig(o, "metadata")["name"].(string), "-scheduler-client-tls") {
						if cn := dig(o, "spec")["commonName"]; "--tls-allowed-client-names="+cn.(string) != tt.wantArg {
							t.Errorf("client Certificate CN %v, allowed %s", cn, tt.wantArg)
						}
					}
				}
			})
		}
	})
	t.Run("health port", func(t *testing.T) {
		scheduler := map[string]any{"from": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"app.kubernetes.io/name": "regosched", "app.kubernetes.io/instance": "regosched", "app.kubernetes.io/component": "scheduler",
		}}}}, "ports": []any{map[string]any{"port": float64(8888), "protocol": "TCP"}}}
		health := func(namespaces ...any) any {
			return map[string]any{"from": []any{map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{
				map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces},
			}}}}, "ports": []any{map[string]any{"port": float64(8081), "protocol": "TCP"}}}
		}
		tests := []struct {
			name    string
			setJSON []string
			want    []any
		}{
			{"default: monitoring", nil, []any{scheduler, health("monitoring")}},
			{"other namespaces", []string{`networkPolicy.health.namespaces=["obs","prometheus"]`}, []any{scheduler, health("obs", "prometheus")}},
			{"none: probes only", []string{`networkPolicy.health.namespaces=[]`}, []any{scheduler}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := Render{SetJSON: tt.setJSON}
				lint(t, root, r)
				np := find(chartObjects(t, root, r), "NetworkPolicy regosched-system/regosched")
				if np == nil {
					t.Fatal("no NetworkPolicy")
				}
				if diff := cmp.Diff(tt.want, dig(np, "spec")["ingress"]); diff != "" {
					t.Errorf("ingress (-want +got):\n%s", diff)
				}
			})
		}
	})
}

// repair.mode: --repair and what it needs, cluster-wide the eviction of
// pods (dry-run only in plan mode, which still needs create) and the
// reading of PodDisruptionBudgets, in the release namespace the ConfigMap
// of repairs; nothing of it when off. Unquoted in a values file, YAML
// reads off and on as booleans, which mean off and on.
func TestChartRepairModes(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	evict := map[string]any{"apiGroups": []any{""}, "resources": []any{"pods/eviction"}, "verbs": []any{"create"}}
	pdbs := map[string]any{"apiGroups": []any{"policy"}, "resources": []any{"poddisruptionbudgets"}, "verbs": []any{"get", "list"}}
	repairs := map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{"regosched-repairs"}, "verbs": []any{"get", "update"}}
	create := map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"create"}}
	tests := []struct {
		name    string
		render  Render
		wantArg string // "": no --repair flag
		// create of ConfigMaps: for the roles' or the repairs'.
		wantCreate bool
	}{
		{"default: plan", Render{}, "--repair=plan", true},
		{"on", Render{Set: []string{"repair.mode=on"}}, "--repair=on", true},
		{"off", Render{Set: []string{"repair.mode=off"}}, "", true},
		{"on without live roles", Render{Set: []string{"repair.mode=on", "redisRoles.enabled=false"}}, "--repair=on", true},
		{"off without live roles", Render{Set: []string{"repair.mode=off", "redisRoles.enabled=false"}}, "", false},
		{"YAML false", Render{SetJSON: []string{"repair.mode=false"}}, "", true},
		{"YAML true", Render{SetJSON: []string{"repair.mode=true"}}, "--repair=on", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lint(t, root, tt.render)
			objs := chartObjects(t, root, tt.render)
			var got []any
			for _, a := range container(t, objs, "regosched")["args"].([]any) {
				if strings.HasPrefix(a.(string), "--repair") {
					got = append(got, a)
				}
			}
			var want []any
			if tt.wantArg != "" {
				want = []any{tt.wantArg}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("--repair flags (-want +got):\n%s", diff)
			}
			on := tt.wantArg != ""
			has := func(key string, rule any) bool {
				return slices.ContainsFunc(rules(t, objs, key), func(r any) bool { return cmp.Equal(r, rule) })
			}
			if got := has("ClusterRole regosched", evict); got != on {
				t.Errorf("ClusterRole creates pods/eviction: %v, want %v", got, on)
			}
			if got := has("ClusterRole regosched", pdbs); got != on {
				t.Errorf("ClusterRole reads PodDisruptionBudgets: %v, want %v", got, on)
			}
			role := "Role regosched-system/regosched-leader-election"
			if got := has(role, repairs); got != on {
				t.Errorf("Role gets and updates ConfigMap regosched-repairs: %v, want %v", got, on)
			}
			if got := has(role, create); got != tt.wantCreate {
				t.Errorf("Role creates ConfigMaps: %v, want %v", got, tt.wantCreate)
			}
			// The admission policy allows both ConfigMaps whatever the
			// values, as it did the roles' without --redis-roles.
			own := expressions(t, objs, "regosched-own-objects")
			if !strings.Contains(own, "object.metadata.name in ['regosched-redis-roles', 'regosched-repairs']") {
				t.Errorf("regosched-own-objects does not allow ConfigMap regosched-repairs:\n%s", own)
			}
		})
	}
}
