package deploytest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// The policy source, the data overlay and the other values deploy/ has no
// overlay for: the flags, volumes and objects they add to the default
// render, and nothing else.
func TestChartValues(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	base := chartObjects(t, root, Render{})
	baseArgs := container(t, base, "regosched")["args"].([]any)
	baseKeys := map[string]bool{}
	for _, o := range base {
		baseKeys[Key(o)] = true
	}
	tests := []struct {
		name    string
		render  Render
		addArgs []any          // args appended to the default's
		volumes map[string]any // volumes added to the extender's, by name
		mounts  []any          // mounts added after the default's
		objects map[string]func(t *testing.T, o Object)
	}{
		{
			name: "policy url, signing key, bearer token",
			render: Render{Set: []string{
				"policy.url=https://bundles.example.com/regosched.tar.gz",
				"policy.verificationKey.value=-----BEGIN PUBLIC KEY-----",
				"policy.verificationKey.keyId=ci", "policy.verificationKey.signingAlg=ES256",
				"policy.verificationKey.scope=prod",
				"policy.bearerToken.existingSecret=bundle-token",
			}},
			addArgs: []any{
				"--policy=https://bundles.example.com/regosched.tar.gz",
				"--policy-verification-key=/etc/regosched/policy-verification-key/key.pem",
				"--policy-verification-key-id=ci",
				"--policy-signing-alg=ES256",
				"--policy-scope=prod",
				"--policy-bearer-token-file=/etc/regosched/policy-bearer-token/token",
			},
			volumes: map[string]any{
				"policy-verification-key": map[string]any{"name": "policy-verification-key", "secret": map[string]any{"secretName": "regosched-policy-verification-key", "defaultMode": float64(0o440)}},
				"policy-bearer-token":     map[string]any{"name": "policy-bearer-token", "secret": map[string]any{"secretName": "bundle-token", "defaultMode": float64(0o440)}},
			},
			mounts: []any{
				map[string]any{"name": "policy-verification-key", "mountPath": "/etc/regosched/policy-verification-key", "readOnly": true},
				map[string]any{"name": "policy-bearer-token", "mountPath": "/etc/regosched/policy-bearer-token", "readOnly": true},
			},
			objects: map[string]func(t *testing.T, o Object){
				"Secret regosched-system/regosched-policy-verification-key": func(t *testing.T, o Object) {
					if diff := cmp.Diff(map[string]any{"key.pem": "LS0tLS1CRUdJTiBQVUJMSUMgS0VZLS0tLS0="}, o["data"]); diff != "" {
						t.Errorf("data (-want +got):\n%s", diff)
					}
				},
			},
		},
		{
			name: "policy signing key from an existing Secret",
			render: Render{Set: []string{
				"policy.url=https://bundles.example.com/regosched.tar.gz",
				"policy.verificationKey.existingSecret=bundle-key", "policy.verificationKey.secretKey=pub.pem",
			}},
			addArgs: []any{
				"--policy=https://bundles.example.com/regosched.tar.gz",
				"--policy-verification-key=/etc/regosched/policy-verification-key/pub.pem",
				"--policy-verification-key-id=default",
				"--policy-signing-alg=RS256",
			},
			volumes: map[string]any{
				"policy-verification-key": map[string]any{"name": "policy-verification-key", "secret": map[string]any{"secretName": "bundle-key", "defaultMode": float64(0o440)}},
			},
			mounts: []any{
				map[string]any{"name": "policy-verification-key", "mountPath": "/etc/regosched/policy-verification-key", "readOnly": true},
			},
		},
		{
			name:    "shadow policy",
			render:  Render{Set: []string{"policy.shadowUrl=https://bundles.example.com/shadow.tar.gz"}},
			addArgs: []any{"--shadow-policy=https://bundles.example.com/shadow.tar.gz"},
		},
		{
			name: "policyData",
			render: Render{SetJSON: []string{
				`policyData={"weights":{"node_spread":3},"workloads":{"elasticsearch":null}}`,
			}},
			addArgs: []any{"--policy-data=/etc/regosched/policy-data/data.json"},
			volumes: map[string]any{
				"policy-data": map[string]any{"name": "policy-data", "configMap": map[string]any{"name": "regosched-policy-data"}},
			},
			mounts: []any{
				map[string]any{"name": "policy-data", "mountPath": "/etc/regosched/policy-data", "readOnly": true},
			},
			objects: map[string]func(t *testing.T, o Object){
				"ConfigMap regosched-system/regosched-policy-data": func(t *testing.T, o Object) {
					var got any
					if err := json.Unmarshal([]byte(dig(o, "data")["data.json"].(string)), &got); err != nil {
						t.Fatal(err)
					}
					want := map[string]any{"weights": map[string]any{"node_spread": float64(3)}, "workloads": map[string]any{"elasticsearch": nil}}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("data.json (-want +got):\n%s", diff)
					}
				},
			},
		},
		{
			name: "redis password file, interval, log level",
			render: Render{Set: []string{
				"redisRoles.passwordSecret.name=redis-auth", "redisRoles.passwordNamespaces={shop,cache}",
				"redisRoles.interval=5s", "logLevel=debug",
			}},
			addArgs: []any{
				"--log-level=debug", "--redis-roles-interval=5s", "--redis-password-file=/etc/regosched/redis-password/password",
				"--redis-password-namespaces=shop,cache",
			},
			volumes: map[string]any{
				"redis-password": map[string]any{"name": "redis-password", "secret": map[string]any{"secretName": "redis-auth", "defaultMode": float64(0o440)}},
			},
			mounts: []any{
				map[string]any{"name": "redis-password", "mountPath": "/etc/regosched/redis-password", "readOnly": true},
			},
		},
		{
			name: "redis password sent in the clear",
			render: Render{Set: []string{
				"redisRoles.passwordSecret.name=redis-auth", "redisRoles.passwordNamespaces={shop}", "redisRoles.passwordInsecure=true",
			}},
			addArgs: []any{
				"--redis-password-file=/etc/regosched/redis-password/password", "--redis-password-namespaces=shop", "--redis-password-insecure",
			},
			volumes: map[string]any{
				"redis-password": map[string]any{"name": "redis-password", "secret": map[string]any{"secretName": "redis-auth", "defaultMode": float64(0o440)}},
			},
			mounts: []any{
				map[string]any{"name": "redis-password", "mountPath": "/etc/regosched/redis-password", "readOnly": true},
			},
		},
		{
			// JSON numbers reach the chart as floats, as numbers of a values
			// file do: 4194304, not 4.194304e+06.
			name: "repair limits",
			render: Render{
				Set:     []string{"repair.maxPerHour=3", "repair.timeout=2m", "repair.cooldown=30m"},
				SetJSON: []string{"repair.maxLagBytes=4194304"},
			},
			addArgs: []any{
				"--repair-max-per-hour=3", "--repair-timeout=2m", "--repair-cooldown=30m", "--repair-max-lag-bytes=4194304",
			},
		},
		{
			// 0 is a value, not an unset one.
			name:    "repair limits of zero",
			render:  Render{Set: []string{"repair.maxPerHour=0", "repair.maxLagBytes=0"}},
			addArgs: []any{"--repair-max-per-hour=0", "--repair-max-lag-bytes=0"},
		},
		{
			name:    "extraArgs",
			render:  Render{Set: []string{"extraArgs={--audit-interval=30s}"}},
			addArgs: []any{"--audit-interval=30s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lint(t, root, tt.render)
			objs := chartObjects(t, root, tt.render)
			c := container(t, objs, "regosched")
			if diff := cmp.Diff(append(slices.Clone(baseArgs), tt.addArgs...), c["args"]); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			wantVolumes := volumes(t, base, "regosched")
			maps.Copy(wantVolumes, tt.volumes)
			if diff := cmp.Diff(wantVolumes, volumes(t, objs, "regosched")); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			wantMounts := append(slices.Clone(container(t, base, "regosched")["volumeMounts"].([]any)), tt.mounts...)
			if diff := cmp.Diff(wantMounts, c["volumeMounts"]); diff != "" {
				t.Errorf("volumeMounts (-want +got):\n%s", diff)
			}
			for k, check := range tt.objects {
				o := find(objs, k)
				if o == nil {
					t.Errorf("no %s", k)
					continue
				}
				check(t, o)
			}
			for _, o := range objs {
				k := Key(o)
				if !baseKeys[k] && tt.objects[k] == nil {
					t.Errorf("unexpected object %s", k)
				}
			}
		})
	}
}

// Another release than "regosched" names every object after itself, and
// its Lease, ConfigMaps of roles and of repairs and Service address too, so that two
// releases in one namespace share nothing.
func TestChartReleaseName(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	objs := chartObjects(t, root, Render{Release: "blue", Namespace: "sched", Set: []string{"replicas=2"}})
	var names []string
	for _, o := range objs {
		names = append(names, Key(o))
	}
	slices.Sort(names)
	want := []string{
		"ClusterRole blue-regosched",
		"ClusterRoleBinding blue-regosched",
		"ClusterRoleBinding blue-regosched-scheduler:kube-scheduler",
		"ClusterRoleBinding blue-regosched-scheduler:volume-scheduler",
		"ConfigMap sched/blue-regosched-scheduler-config",
		"Deployment sched/blue-regosched",
		"Deployment sched/blue-regosched-scheduler",
		"NetworkPolicy sched/blue-regosched",
		"PodDisruptionBudget sched/blue-regosched",
		"PodDisruptionBudget sched/blue-regosched-scheduler",
		"Role sched/blue-regosched-leader-election",
		"Role sched/blue-regosched-scheduler:leader-election",
		"RoleBinding kube-system/blue-regosched-scheduler:extension-apiserver-authentication-reader",
		"RoleBinding sched/blue-regosched-leader-election",
		"RoleBinding sched/blue-regosched-scheduler:leader-election",
		"Service sched/blue-regosched",
		"ServiceAccount sched/blue-regosched",
		"ServiceAccount sched/blue-regosched-scheduler",
		"ValidatingAdmissionPolicy blue-regosched-dry-run-evictions",
		"ValidatingAdmissionPolicy blue-regosched-events",
		"ValidatingAdmissionPolicy blue-regosched-own-objects",
		"ValidatingAdmissionPolicy blue-regosched-pod-patch",
		"ValidatingAdmissionPolicyBinding blue-regosched-dry-run-evictions",
		"ValidatingAdmissionPolicyBinding blue-regosched-events",
		"ValidatingAdmissionPolicyBinding blue-regosched-own-objects",
		"ValidatingAdmissionPolicyBinding blue-regosched-pod-patch",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	args := container(t, objs, "blue-regosched")["args"].([]any)
	wantArgs := []any{
		"serve", "--log-format=json", "--health-listen=:8081", "--soft-rules=filter", "--redis-roles", "--repair=plan", "--leader-elect",
		"--leader-elect-name=blue-regosched", "--redis-roles-configmap=blue-regosched-redis-roles",
		"--repair-configmap=blue-regosched-repairs",
	}
	if diff := cmp.Diff(wantArgs, args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	var cfg struct {
		LeaderElection map[string]any   `json:"leaderElection"`
		Extenders      []map[string]any `json:"extenders"`
	}
	for _, o := range objs {
		if Key(o) == "ConfigMap sched/blue-regosched-scheduler-config" {
			if err := yaml.Unmarshal([]byte(dig(o, "data")["kube-scheduler-config.yaml"].(string)), &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := map[string]any{"lease": cfg.LeaderElection, "url": cfg.Extenders[0]["urlPrefix"]}
	wantCfg := map[string]any{
		"lease": map[string]any{"leaderElect": true, "resourceNamespace": "sched", "resourceName": "blue-regosched-scheduler"},
		"url":   "http://blue-regosched.sched.svc:8888/scheduler",
	}
	if diff := cmp.Diff(wantCfg, got); diff != "" {
		t.Errorf("scheduler configuration (-want +got):\n%s", diff)
	}
}

// Values that make no sense, or are misspelt, are refused with a message,
// not rendered.
func TestChartRefusesValues(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name, set, want string
	}{
		{"bearer token without url", "policy.bearerToken.existingSecret=t", "policy.bearerToken needs policy.url"},
		{"two verification keys", "policy.verificationKey.existingSecret=a,policy.verificationKey.value=b", "set existingSecret or value, not both"},
		// values.schema.json: a misspelt key would otherwise be ignored
		// and, here, deploy plain HTTP.
		{"misspelt value", "tls.enable=true", "additional properties 'enable' not allowed"},
		{"no replica", "replicas=0", "/replicas"},
		{"no scheduler replica", "scheduler.replicas=0", "/scheduler/replicas"},
		{"policyData with a signed bundle", "policy.verificationKey.existingSecret=k,policyData.weights.node_spread=2", "policyData cannot be combined with policy.verificationKey"},
		{"soft rules nowhere", "softRules=score", "/softRules"},
		// regosched would send the password to any pod that looks like a
		// Redis, in any tenant's namespace.
		{"redis password without its namespaces", "redisRoles.passwordSecret.name=redis-auth", "redisRoles.passwordSecret needs redisRoles.passwordNamespaces"},
		{"allowed client name with a comma", "tls.enabled=true,tls.allowedClientNames[0]=a\\,b", "/tls/allowedClientNames/0"},
		{"repair mode misspelt", "repair.mode=dry-run", "/repair/mode"},
		{"repair limit not a number", "repair.maxPerHour=many", "/repair/maxPerHour"},
		{"repair timeout not a duration", "repair.timeout=5", "/repair/timeout"},
		{"repair key misspelt", "repair.maxLag=1", "additional properties 'maxLag' not allowed"},
		// Renamed: one monitoring.labels for every monitoring object.
		{"serviceMonitor labels", "monitoring.serviceMonitor.labels.release=prometheus", `monitoring.serviceMonitor.labels is replaced by monitoring.labels, one set of labels for the ServiceMonitors, PodMonitors and the PrometheusRule (default release: kube-prometheus-stack): move {"release":"prometheus"} there`},
		{"prometheusRule labels", "monitoring.prometheusRule.labels.team=a", "monitoring.prometheusRule.labels is replaced by monitoring.labels"},
		{"two monitors of the same pods", "monitoring.serviceMonitor.enabled=true,monitoring.podMonitor.enabled=true", "scrape the same pods twice"},
		{"monitoring label not a string", "monitoring.labels.tier=1", "/monitoring/labels/tier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
			defer cancel()
			_, err := Render{Set: []string{tt.set}, APIVersions: CRDAPIVersions}.Template(ctx, root)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("helm template --set %s: error %v, want one containing %q", tt.set, err, tt.want)
			}
		})
	}
	// The renamed keys empty, as helm upgrade --reuse-values carries them
	// from an older release, are accepted.
	chartObjects(t, root, Render{SetJSON: []string{"monitoring.serviceMonitor.labels={}", "monitoring.prometheusRule.labels={}"}})
}

// softRules sets regosched's --soft-rules and, with it, whether the
// scheduler's extender entry has a prioritizeVerb (and its weight): the two
// must agree, or soft rules act twice or not at all.
func TestChartSoftRules(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		set        string
		wantArg    string
		wantVerb   any
		wantWeight any
	}{
		{"", "--soft-rules=filter", nil, nil},
		{"softRules=prioritize", "--soft-rules=prioritize", "prioritize", float64(5)},
		{"softRules=prioritize,scheduler.extender.weight=3", "--soft-rules=prioritize", "prioritize", float64(3)},
	}
	for _, tt := range tests {
		t.Run("set "+tt.set, func(t *testing.T) {
			var r Render
			if tt.set != "" {
				r.Set = []string{tt.set}
			}
			objs := chartObjects(t, root, r)
			args := container(t, objs, "regosched")["args"].([]any)
			if !slices.Contains(args, any(tt.wantArg)) {
				t.Errorf("extender args %v lack %s", args, tt.wantArg)
			}
			var doc struct {
				Extenders []map[string]any `json:"extenders"`
			}
			if err := yaml.Unmarshal(schedulerConfig(t, objs), &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Extenders) != 1 {
				t.Fatalf("extenders: %v", doc.Extenders)
			}
			if got := doc.Extenders[0]["prioritizeVerb"]; got != tt.wantVerb {
				t.Errorf("prioritizeVerb = %v, want %v", got, tt.wantVerb)
			}
			if got := doc.Extenders[0]["weight"]; got != tt.wantWeight {
				t.Errorf("weight = %v, want %v", got, tt.wantWeight)
			}
		})
	}
}

// The scheduler image follows the cluster's version (.Capabilities
// .KubeVersion) unless scheduler.image.tag is set: a +build suffix and a
// vendor's pre-release suffix are dropped, alpha/beta/rc kept.
func TestSchedulerImageFollowsTheCluster(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name, kubeVersion, tag, want string
	}{
		{"deploy/'s version", "v1.37.2", "", "registry.k8s.io/kube-scheduler:v1.37.2"},
		{"k3s build suffix", "v1.36.4+k3s1", "", "registry.k8s.io/kube-scheduler:v1.36.4"},
		{"EKS suffix", "v1.36.3-eks-4f4795d", "", "registry.k8s.io/kube-scheduler:v1.36.3"},
		{"GKE suffix", "v1.37.1-gke.1263000", "", "registry.k8s.io/kube-scheduler:v1.37.1"},
		{"release candidate", "v1.38.0-rc.1", "", "registry.k8s.io/kube-scheduler:v1.38.0-rc.1"},
		{"tag set", "v1.37.2", "v1.36.0", "registry.k8s.io/kube-scheduler:v1.36.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Render{KubeVersion: tt.kubeVersion}
			if tt.tag != "" {
				r.Set = []string{"scheduler.image.tag=" + tt.tag}
			}
			got := container(t, chartObjects(t, root, r), "regosched-scheduler")["image"]
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("image (-want +got):\n%s", diff)
			}
		})
	}
}

// scheduler.extender.ignorable is the extender entry's ignorable: false
// (fail closed) by default, as deploy/'s, and true only when asked for.
func TestChartIgnorable(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name   string
		render Render
		want   any
	}{
		{"default: fail closed", Render{}, false},
		{"fail closed, tls", Render{Set: []string{"tls.enabled=true"}}, false},
		{"fail open", Render{Set: []string{"scheduler.extender.ignorable=true"}}, true},
		{"fail open, tls", Render{Set: []string{"scheduler.extender.ignorable=true", "tls.enabled=true"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lint(t, root, tt.render)
			var doc struct {
				Extenders []map[string]any `json:"extenders"`
			}
			if err := yaml.Unmarshal(schedulerConfig(t, chartObjects(t, root, tt.render)), &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Extenders) != 1 {
				t.Fatalf("extenders: %v", doc.Extenders)
			}
			if got := doc.Extenders[0]["ignorable"]; got != tt.want {
				t.Errorf("ignorable = %v, want %v", got, tt.want)
			}
		})
	}
}
