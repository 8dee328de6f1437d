package deploytest

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/test/localcluster"
)

// The differences between the chart and deploy/ that are intended, removed
// from both sides before they are compared. Everything else must match.
//
//  1. Labels Helm charts carry: helm.sh/chart, app.kubernetes.io/managed-by,
//     app.kubernetes.io/version on every object, and app.kubernetes.io/instance
//     (the release) on every object, pod template and selector, so that two
//     releases never select each other's pods.
//  2. The scheduler's ConfigMap: kustomize appends a content hash to its name
//     (regosched-scheduler-config-<hash>), the chart puts the content's
//     checksum into the scheduler's pod template (annotation checksum/config);
//     both roll the scheduler on a change.
//  3. The scheduler configuration is compared as parsed YAML: its comments
//     differ where they name the namespace or the Secret.
//  4. priorityClassName: system-cluster-critical on both Deployments (the
//     chart's default, checked here; deploy/ sets none).
//  5. The Namespace: deploy/ creates regosched-system with its Pod Security
//     labels; the chart renders it only with namespace.create=true (case
//     "namespace.create"), and then with helm.sh/resource-policy: keep.
//
// The scheduler image is not normalised: rendered for --kube-version v1.37.2
// the chart's tag is deploy/'s (TestSchedulerImageFollowsTheCluster).
var helmLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/version",
	"app.kubernetes.io/instance",
}

const defaultPriorityClass = "system-cluster-critical"

// kustomize's ConfigMap generator suffix.
var hashSuffix = regexp.MustCompile(`-[a-z0-9]{10}$`)

// normalizeChart removes the chart's side of the intended differences.
func normalizeChart(t *testing.T, objs []Object) map[string]Object {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "Deployment" {
			spec := dig(o, "spec", "template", "spec")
			if got := spec["priorityClassName"]; got != defaultPriorityClass {
				t.Errorf("%s: priorityClassName = %v, want %s", Key(o), got, defaultPriorityClass)
			}
			delete(spec, "priorityClassName")
			ann := dig(o, "spec", "template", "metadata", "annotations")
			delete(ann, "checksum/config")
			if len(ann) == 0 {
				delete(dig(o, "spec", "template", "metadata"), "annotations")
			}
		}
		if o["kind"] == "Namespace" {
			md := dig(o, "metadata")
			ann := dig(o, "metadata", "annotations")
			if ann["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s: annotations %v, want helm.sh/resource-policy: keep", Key(o), ann)
			}
			delete(ann, "helm.sh/resource-policy")
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	return normalize(t, objs, nil)
}

// normalizeKustomize removes kustomize's side: ConfigMap hash suffixes.
func normalizeKustomize(t *testing.T, objs []Object) map[string]Object {
	t.Helper()
	renames := map[string]string{}
	for _, o := range objs {
		if o["kind"] != "ConfigMap" {
			continue
		}
		md := dig(o, "metadata")
		name, _ := md["name"].(string)
		if hashSuffix.MatchString(name) {
			renames[name] = hashSuffix.ReplaceAllString(name, "")
		}
	}
	return normalize(t, objs, renames)
}

// normalize drops helmLabels, renames strings (every string value equal to
// a key of renames), parses scheduler configurations, and keys the objects.
func normalize(t *testing.T, objs []Object, renames map[string]string) map[string]Object {
	t.Helper()
	out := map[string]Object{}
	for _, o := range objs {
		o = walk(o, renames).(map[string]any)
		if o["kind"] == "ConfigMap" {
			data := dig(o, "data")
			for k, v := range data {
				s, _ := v.(string)
				if !strings.Contains(s, "kind: KubeSchedulerConfiguration") {
					continue
				}
				var cfg map[string]any
				if err := yaml.Unmarshal([]byte(s), &cfg); err != nil {
					t.Fatalf("%s: %s: %v", Key(o), k, err)
				}
				data[k] = cfg
			}
		}
		k := Key(o)
		if _, dup := out[k]; dup {
			t.Errorf("%s rendered twice", k)
		}
		out[k] = o
	}
	return out
}

func walk(v any, renames map[string]string) any {
	switch v := v.(type) {
	case map[string]any:
		for _, l := range helmLabels {
			delete(v, l)
		}
		for k, e := range v {
			v[k] = walk(e, renames)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = walk(e, renames)
		}
		return v
	case string:
		if r, ok := renames[v]; ok {
			return r
		}
		return v
	default:
		return v
	}
}

// extenderArgs returns the args of the extender container.
func extenderArgs(t *testing.T, objs map[string]Object) []any {
	t.Helper()
	d, ok := objs["Deployment regosched-system/regosched"]
	if !ok {
		t.Fatal("no Deployment regosched-system/regosched")
	}
	return dig(d, "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)["args"].([]any)
}

// setArgs stores args back into the extender container.
func setArgs(objs map[string]Object, args []any) {
	d := objs["Deployment regosched-system/regosched"]
	dig(d, "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)["args"] = args
}

// removeRule drops the rule of a Role or ClusterRole that grants verbs on
// resources exactly.
func removeRule(t *testing.T, o Object, resources, verbs []any) {
	t.Helper()
	rules := o["rules"].([]any)
	n := len(rules)
	rules = slices.DeleteFunc(rules, func(r any) bool {
		m := r.(map[string]any)
		return cmp.Equal(m["resources"], resources) && cmp.Equal(m["verbs"], verbs)
	})
	if len(rules) != n-1 {
		t.Fatalf("%s: no rule %v %v to remove", Key(o), resources, verbs)
	}
	o["rules"] = rules
}

// removeNamedRule drops the rule of a Role or ClusterRole that grants verbs
// on resources of the names given, exactly.
func removeNamedRule(t *testing.T, o Object, resources, names, verbs []any) {
	t.Helper()
	rules := o["rules"].([]any)
	n := len(rules)
	rules = slices.DeleteFunc(rules, func(r any) bool {
		m := r.(map[string]any)
		return cmp.Equal(m["resources"], resources) && cmp.Equal(m["resourceNames"], names) && cmp.Equal(m["verbs"], verbs)
	})
	if len(rules) != n-1 {
		t.Fatalf("%s: no rule %v %v %v to remove", Key(o), resources, names, verbs)
	}
	o["rules"] = rules
}

// removeDryRunPolicy drops deploy/extender/repair-plan-admission-policy.yaml's
// objects, which keep --repair=plan's evictions to dry runs.
func removeDryRunPolicy(t *testing.T, want map[string]Object) {
	t.Helper()
	for _, k := range []string{"ValidatingAdmissionPolicy regosched-dry-run-evictions", "ValidatingAdmissionPolicyBinding regosched-dry-run-evictions"} {
		if _, ok := want[k]; !ok {
			t.Fatalf("no %s to remove", k)
		}
		delete(want, k)
	}
}

// certManagerObjects are what tls.certManager.enabled adds to deploy/tls:
// the two Certificates of deploy/README.md's sketch, with the chart's
// self-signed CA as their issuer.
const certManagerObjects = `
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: regosched-selfsigned
  namespace: regosched-system
  labels: {app.kubernetes.io/name: regosched, app.kubernetes.io/component: tls, app.kubernetes.io/part-of: regosched}
spec:
  selfSigned: {}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: regosched-ca
  namespace: regosched-system
  labels: {app.kubernetes.io/name: regosched, app.kubernetes.io/component: tls, app.kubernetes.io/part-of: regosched}
spec:
  secretName: regosched-ca
  isCA: true
  commonName: regosched CA
  duration: 87600h
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {kind: Issuer, name: regosched-selfsigned}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: regosched-ca
  namespace: regosched-system
  labels: {app.kubernetes.io/name: regosched, app.kubernetes.io/component: tls, app.kubernetes.io/part-of: regosched}
spec:
  ca: {secretName: regosched-ca}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: regosched-tls
  namespace: regosched-system
  labels: {app.kubernetes.io/name: regosched, app.kubernetes.io/component: tls, app.kubernetes.io/part-of: regosched}
spec:
  secretName: regosched-tls
  issuerRef: {kind: Issuer, name: regosched-ca}
  dnsNames: [regosched.regosched-system.svc, regosched.regosched-system.svc.cluster.local]
  duration: 2160h
  renewBefore: 720h
  privateKey: {algorithm: ECDSA, size: 256}
  usages: [server auth, digital signature]
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: regosched-scheduler-client-tls
  namespace: regosched-system
  labels: {app.kubernetes.io/name: regosched, app.kubernetes.io/component: tls, app.kubernetes.io/part-of: regosched}
spec:
  secretName: regosched-scheduler-client-tls
  issuerRef: {kind: Issuer, name: regosched-ca}
  commonName: regosched-scheduler
  duration: 2160h
  renewBefore: 720h
  privateKey: {algorithm: ECDSA, size: 256}
  usages: [client auth, digital signature]
`

// The chart renders deploy/'s objects for the values that say the same, and
// helm lint --strict passes for each.
func TestChartRendersDeploy(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name      string
		render    Render
		kustomize string // the kustomization whose objects are wanted
		// keepNamespace keeps deploy/'s Namespace (see intended difference 5).
		keepNamespace bool
		// edit changes the wanted objects where the values intend to.
		edit func(t *testing.T, want map[string]Object)
	}{
		{name: "default", kustomize: "deploy"},
		{name: "replicas=2", render: Render{Set: []string{"replicas=2"}}, kustomize: "deploy/ha"},
		{name: "tls.enabled", render: Render{Set: []string{"tls.enabled=true"}}, kustomize: "deploy/tls"},
		{name: "tls.enabled replicas=2", render: Render{Set: []string{"tls.enabled=true", "replicas=2"}}, kustomize: "deploy/tls/ha"},
		{
			name: "tls.certManager.enabled", render: Render{Set: []string{"tls.certManager.enabled=true"}, APIVersions: CRDAPIVersions}, kustomize: "deploy/tls",
			edit: func(t *testing.T, want map[string]Object) {
				maps.Copy(want, normalize(t, clone(t, []byte(certManagerObjects)), nil))
			},
		},
		{name: "namespace.create", render: Render{Set: []string{"namespace.create=true"}}, kustomize: "deploy", keepNamespace: true},
		{
			name: "networkPolicy.enabled=false", render: Render{Set: []string{"networkPolicy.enabled=false"}}, kustomize: "deploy",
			edit: func(t *testing.T, want map[string]Object) {
				delete(want, "NetworkPolicy regosched-system/regosched")
			},
		},
		{
			name: "redisRoles.enabled=false", render: Render{Set: []string{"redisRoles.enabled=false"}}, kustomize: "deploy",
			edit: func(t *testing.T, want map[string]Object) {
				args := extenderArgs(t, want)
				setArgs(want, slices.DeleteFunc(args, func(a any) bool { return a == "--redis-roles" }))
				// Patching pods is for role labels (and the leader label,
				// with replicas > 1); the ConfigMap keeps the roles. The
				// create of ConfigMaps stays, for --repair's.
				removeRule(t, want["ClusterRole regosched"], []any{"pods"}, []any{"patch"})
				removeNamedRule(t, want["Role regosched-system/regosched-leader-election"], []any{"configmaps"}, []any{"regosched-redis-roles"}, []any{"get", "update"})
			},
		},
		{
			name: "repair.mode=off", render: Render{Set: []string{"repair.mode=off"}}, kustomize: "deploy",
			edit: func(t *testing.T, want map[string]Object) {
				// No flag (regosched's default is off), no evictions, no
				// PodDisruptionBudgets, no ConfigMap of repairs. The
				// admission policy still names it, as it names the
				// ConfigMap of roles without --redis-roles. No dry-run
				// policy either: nothing to evict.
				args := extenderArgs(t, want)
				setArgs(want, slices.DeleteFunc(args, func(a any) bool { return a == "--repair=plan" }))
				removeRule(t, want["ClusterRole regosched"], []any{"pods/eviction"}, []any{"create"})
				removeDryRunPolicy(t, want)
				removeRule(t, want["ClusterRole regosched"], []any{"poddisruptionbudgets"}, []any{"get", "list"})
				removeNamedRule(t, want["Role regosched-system/regosched-leader-election"], []any{"configmaps"}, []any{"regosched-repairs"}, []any{"get", "update"})
			},
		},
		{
			name: "repair.mode=off redisRoles.enabled=false", render: Render{Set: []string{"repair.mode=off", "redisRoles.enabled=false"}}, kustomize: "deploy",
			edit: func(t *testing.T, want map[string]Object) {
				// Neither ConfigMap: no create of ConfigMaps at all.
				args := extenderArgs(t, want)
				setArgs(want, slices.DeleteFunc(args, func(a any) bool { return a == "--repair=plan" || a == "--redis-roles" }))
				removeRule(t, want["ClusterRole regosched"], []any{"pods"}, []any{"patch"})
				removeRule(t, want["ClusterRole regosched"], []any{"pods/eviction"}, []any{"create"})
				removeDryRunPolicy(t, want)
				removeRule(t, want["ClusterRole regosched"], []any{"poddisruptionbudgets"}, []any{"get", "list"})
				role := want["Role regosched-system/regosched-leader-election"]
				removeNamedRule(t, role, []any{"configmaps"}, []any{"regosched-redis-roles"}, []any{"get", "update"})
				removeNamedRule(t, role, []any{"configmaps"}, []any{"regosched-repairs"}, []any{"get", "update"})
				removeRule(t, role, []any{"configmaps"}, []any{"create"})
			},
		},
		{
			name: "redisRoles.podSecrets", kustomize: "deploy",
			render: Render{Set: []string{"redisRoles.podSecrets.enabled=true", "redisRoles.podSecrets.namespaces={shop}"}},
			edit: func(t *testing.T, want map[string]Object) {
				maps.Copy(want, normalize(t, fileObjects(t, root, "deploy/extender/redis-secrets-rbac.yaml"), nil))
				setArgs(want, append(extenderArgs(t, want), "--redis-pod-secrets"))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lint(t, root, tt.render)
			want := normalizeKustomize(t, kustomizeObjects(t, root, tt.kustomize))
			if !tt.keepNamespace {
				if _, ok := want["Namespace regosched-system"]; !ok {
					t.Fatalf("kustomize build %s: no Namespace regosched-system", tt.kustomize)
				}
				delete(want, "Namespace regosched-system")
			}
			if tt.edit != nil {
				tt.edit(t, want)
			}
			got := normalizeChart(t, chartObjects(t, root, tt.render))
			if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			for k, w := range want {
				if g, ok := got[k]; ok {
					if diff := cmp.Diff(w, g); diff != "" {
						t.Errorf("%s (-want +got):\n%s", k, diff)
					}
				}
			}
		})
	}
}

// The end-to-end suite runs its kube-scheduler with deploy/'s configuration
// file passed through localcluster.SchedulerConfig (kubeconfig, extender
// URL, no leader election). The chart's rendered configuration, passed
// through the same function, gives the very same bytes: the suite's
// scheduler runs what the chart deploys. So does scheduler/e2e's
// regosched-scheduler, with deploy/plugin's file and no extender URL
// (localstack.PluginSchedulerConfig), for mode plugin.
func TestChartSchedulerConfigAsTheE2ESuiteRunsIt(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name, file string
		render     Render
		url        string
	}{
		{"plain", "deploy/scheduler/kube-scheduler-config.yaml", Render{}, "http://127.0.0.1:8888/scheduler"},
		{"tls.enabled", "deploy/tls/mtls/kube-scheduler-config.yaml", Render{Set: []string{"tls.enabled=true"}}, "http://127.0.0.1:8888/scheduler"},
		{"mode=plugin", "deploy/plugin/kube-scheduler-config.yaml", Render{Set: []string{"mode=plugin"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deployed, err := os.ReadFile(filepath.Join(root, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			chart := schedulerConfig(t, chartObjects(t, root, tt.render))
			ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
			defer cancel()
			// The helper the e2e suite would use gives the same text.
			viaHelper, err := tt.render.SchedulerConfig(ctx, root)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(chart), string(viaHelper)); diff != "" {
				t.Errorf("Render.SchedulerConfig (-want +got):\n%s", diff)
			}
			const kubeconfig = "/tmp/kubeconfig"
			url := tt.url
			want, err := localcluster.SchedulerConfig(deployed, kubeconfig, url)
			if err != nil {
				t.Fatal(err)
			}
			got, err := localcluster.SchedulerConfig(chart, kubeconfig, url)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("scheduler configuration as the e2e suite runs it (-want %s +got chart):\n%s", tt.file, diff)
			}
		})
	}
}
