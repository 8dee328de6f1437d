package deploytest

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/policy"
	"github.com/regosched/regosched/test/localcluster"
)

// toolTimeout bounds one test's helm and kustomize runs, including the
// first, cold build of the tools (minutes on a busy 2-core machine).
const toolTimeout = 20 * time.Minute

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := localcluster.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("renders with helm and kustomize (built from the Go module proxy on first use)")
	}
}

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

// dig returns the mapping at path, creating none: an empty map (not stored)
// when something on the way is missing.
func dig(o map[string]any, path ...string) map[string]any {
	cur := o
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return map[string]any{}
		}
		cur = next
	}
	return cur
}

// renders memoises helm template and kustomize build within the test binary.
var renders sync.Map

func memo(t *testing.T, key string, f func(context.Context) ([]byte, error)) []Object {
	t.Helper()
	if v, ok := renders.Load(key); ok {
		return clone(t, v.([]byte))
	}
	ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
	defer cancel()
	out, err := f(ctx)
	if err != nil {
		t.Fatal(err)
	}
	renders.Store(key, out)
	return clone(t, out)
}

func clone(t *testing.T, stream []byte) []Object {
	t.Helper()
	objs, err := Objects(stream)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func kustomizeObjects(t *testing.T, root, dir string) []Object {
	t.Helper()
	return memo(t, "kustomize "+dir, func(ctx context.Context) ([]byte, error) { return Kustomize(ctx, root, dir) })
}

func chartObjects(t *testing.T, root string, r Render) []Object {
	t.Helper()
	key, _ := json.Marshal(r)
	return memo(t, "helm "+string(key), func(ctx context.Context) ([]byte, error) { return r.Template(ctx, root) })
}

func lint(t *testing.T, root string, r Render) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
	defer cancel()
	out, err := r.Lint(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "0 chart(s) failed") {
		t.Fatalf("helm lint:\n%s", out)
	}
}

func fileObjects(t *testing.T, root, rel string) []Object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return clone(t, b)
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
			name: "tls.certManager.enabled", render: Render{Set: []string{"tls.certManager.enabled=true"}}, kustomize: "deploy/tls",
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
				// with replicas > 1); the ConfigMap keeps the roles.
				removeRule(t, want["ClusterRole regosched"], []any{"pods"}, []any{"patch"})
				removeRule(t, want["Role regosched-system/regosched-leader-election"], []any{"configmaps"}, []any{"get", "create", "update"})
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

// schedulerConfig returns the KubeSchedulerConfiguration text of the
// chart's scheduler ConfigMap.
func schedulerConfig(t *testing.T, objs []Object) []byte {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "ConfigMap" && dig(o, "metadata")["name"] == "regosched-scheduler-config" {
			s, _ := dig(o, "data")["kube-scheduler-config.yaml"].(string)
			return []byte(s)
		}
	}
	t.Fatal("no ConfigMap regosched-scheduler-config")
	return nil
}

// The end-to-end suite runs its kube-scheduler with deploy/'s configuration
// file passed through localcluster.SchedulerConfig (kubeconfig, extender
// URL, no leader election). The chart's rendered configuration, passed
// through the same function, gives the very same bytes: the suite's
// scheduler runs what the chart deploys.
func TestChartSchedulerConfigAsTheE2ESuiteRunsIt(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name, file string
		render     Render
	}{
		{"plain", "deploy/scheduler/kube-scheduler-config.yaml", Render{}},
		{"tls.enabled", "deploy/tls/mtls/kube-scheduler-config.yaml", Render{Set: []string{"tls.enabled=true"}}},
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
			const kubeconfig, url = "/tmp/kubeconfig", "http://127.0.0.1:8888/scheduler"
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

// container returns the first container of a Deployment.
func container(t *testing.T, objs []Object, name string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "Deployment" && dig(o, "metadata")["name"] == name {
			return dig(o, "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

func volumes(t *testing.T, objs []Object, deployment string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "Deployment" && dig(o, "metadata")["name"] == deployment {
			out := map[string]any{}
			vs, _ := dig(o, "spec", "template", "spec")["volumes"].([]any)
			for _, v := range vs {
				m := v.(map[string]any)
				out[m["name"].(string)] = m
			}
			return out
		}
	}
	t.Fatalf("no Deployment %s", deployment)
	return nil
}

func find(objs []Object, key string) Object {
	for _, o := range objs {
		if Key(o) == key {
			return o
		}
	}
	return nil
}

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
			name:    "redis password file, interval, log level",
			render:  Render{Set: []string{"redisRoles.passwordSecret.name=redis-auth", "redisRoles.interval=5s", "logLevel=debug"}},
			addArgs: []any{"--log-level=debug", "--redis-roles-interval=5s", "--redis-password-file=/etc/regosched/redis-password/password"},
			volumes: map[string]any{
				"redis-password": map[string]any{"name": "redis-password", "secret": map[string]any{"secretName": "redis-auth", "defaultMode": float64(0o440)}},
			},
			mounts: []any{
				map[string]any{"name": "redis-password", "mountPath": "/etc/regosched/redis-password", "readOnly": true},
			},
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
// its Lease, ConfigMap of roles and Service address too, so that two
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
		"Role sched/blue-regosched-leader-election",
		"Role sched/blue-regosched-scheduler:leader-election",
		"RoleBinding kube-system/blue-regosched-scheduler:extension-apiserver-authentication-reader",
		"RoleBinding sched/blue-regosched-leader-election",
		"RoleBinding sched/blue-regosched-scheduler:leader-election",
		"Service sched/blue-regosched",
		"ServiceAccount sched/blue-regosched",
		"ServiceAccount sched/blue-regosched-scheduler",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	args := container(t, objs, "blue-regosched")["args"].([]any)
	wantArgs := []any{
		"serve", "--log-format=json", "--health-listen=:8081", "--soft-rules=filter", "--redis-roles", "--leader-elect",
		"--leader-elect-name=blue-regosched", "--redis-roles-configmap=blue-regosched-redis-roles",
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
		{"policyData with a signed bundle", "policy.verificationKey.existingSecret=k,policyData.weights.node_spread=2", "policyData cannot be combined with policy.verificationKey"},
		{"soft rules nowhere", "softRules=score", "/softRules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
			defer cancel()
			_, err := Render{Set: []string{tt.set}}.Template(ctx, root)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("helm template --set %s: error %v, want one containing %q", tt.set, err, tt.want)
			}
		})
	}
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
		{"EKS suffix", "v1.35.3-eks-4f4795d", "", "registry.k8s.io/kube-scheduler:v1.35.3"},
		{"GKE suffix", "v1.34.1-gke.1263000", "", "registry.k8s.io/kube-scheduler:v1.34.1"},
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

// Monitoring: the PodMonitors, the PrometheusRule embedding the groups of
// files/prometheus-rules.yaml, the dashboard ConfigMap. Rendered from a copy
// of the chart, with placeholders for the two files while they are not in
// the chart yet.
func TestChartMonitoring(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	dir := t.TempDir()
	placeholders, err := StageChart(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(placeholders) > 0 {
		t.Logf("placeholders for %v (not in the chart yet)", placeholders)
	}
	r := Render{Chart: dir, Set: []string{
		"monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.labels.release=prometheus",
		"monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true",
	}}
	lint(t, root, r)
	objs := chartObjects(t, root, r)

	rulesText, err := os.ReadFile(filepath.Join(dir, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(rulesText, &rules); err != nil {
		t.Fatal(err)
	}
	dashboard, err := os.ReadFile(filepath.Join(dir, DashboardFile))
	if err != nil {
		t.Fatal(err)
	}

	podMonitor := func(job, component, port, scheme string) func(t *testing.T, o Object) {
		return func(t *testing.T, o Object) {
			if got := dig(o, "metadata", "labels")["release"]; got != "prometheus" {
				t.Errorf("label release = %v, want prometheus", got)
			}
			want := map[string]any{"app.kubernetes.io/name": "regosched", "app.kubernetes.io/instance": "regosched", "app.kubernetes.io/component": component}
			if diff := cmp.Diff(want, dig(o, "spec", "selector", "matchLabels")); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
			ep := dig(o, "spec")["podMetricsEndpoints"].([]any)[0].(map[string]any)
			got := map[string]any{"port": ep["port"], "path": ep["path"], "scheme": ep["scheme"], "job": ep["relabelings"].([]any)[0].(map[string]any)["replacement"]}
			if diff := cmp.Diff(map[string]any{"port": port, "path": "/metrics", "scheme": scheme, "job": job}, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		}
	}
	checks := map[string]func(t *testing.T, o Object){
		"PodMonitor regosched-system/regosched":           podMonitor("regosched", "extender", "health", "http"),
		"PodMonitor regosched-system/regosched-scheduler": podMonitor("regosched-scheduler", "scheduler", "https", "https"),
		"PrometheusRule regosched-system/regosched": func(t *testing.T, o Object) {
			if diff := cmp.Diff(rules, o["spec"]); diff != "" {
				t.Errorf("spec (-want %s +got):\n%s", RulesFile, diff)
			}
		},
		"ConfigMap regosched-system/regosched-dashboard": func(t *testing.T, o Object) {
			if got := dig(o, "metadata", "labels")["grafana_dashboard"]; got != "1" {
				t.Errorf("label grafana_dashboard = %v, want \"1\"", got)
			}
			var want, got any
			if err := json.Unmarshal(dashboard, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(dig(o, "data")["regosched.json"].(string)), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("dashboard (-want +got):\n%s", diff)
			}
		},
		// kube-scheduler authorizes /metrics: a reader the PodMonitor's
		// token belongs to.
		"ServiceAccount regosched-system/regosched-metrics-reader": func(*testing.T, Object) {},
		"Secret regosched-system/regosched-metrics-reader": func(t *testing.T, o Object) {
			if o["type"] != "kubernetes.io/service-account-token" {
				t.Errorf("type = %v", o["type"])
			}
		},
		"ClusterRole regosched-metrics-reader": func(t *testing.T, o Object) {
			want := []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}
			if diff := cmp.Diff(want, o["rules"]); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		},
		"ClusterRoleBinding regosched-metrics-reader": func(*testing.T, Object) {},
	}
	base := map[string]bool{}
	for _, o := range chartObjects(t, root, Render{}) {
		base[Key(o)] = true
	}
	for _, o := range objs {
		k := Key(o)
		if base[k] {
			continue
		}
		check, ok := checks[k]
		if !ok {
			t.Errorf("unexpected object %s", k)
			continue
		}
		t.Run(k, func(t *testing.T) { check(t, o) })
		delete(checks, k)
	}
	for k := range checks {
		t.Errorf("no %s", k)
	}
}

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
			opts := policy.Options{DataFile: file}
			b, err := opts.LoadFS(regosched.DefaultPolicy(), "embedded")
			if err != nil {
				t.Fatal(err)
			}
			_, err = opts.Compile(t.Context(), b)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("the embedded policy with this policyData: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one naming %q", err, tt.wantErr)
			}
		})
	}
}
