package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// schedulerConfiguration is what the tests read of a
// KubeSchedulerConfiguration, decoded strictly: any field not here fails.
type schedulerConfiguration struct {
	APIVersion     string `json:"apiVersion"`
	Kind           string `json:"kind"`
	LeaderElection struct {
		LeaderElect       bool   `json:"leaderElect"`
		ResourceNamespace string `json:"resourceNamespace"`
		ResourceName      string `json:"resourceName"`
	} `json:"leaderElection"`
	Profiles []struct {
		SchedulerName string `json:"schedulerName"`
		Plugins       struct {
			MultiPoint struct {
				Enabled []struct {
					Name   string `json:"name"`
					Weight int    `json:"weight"`
				} `json:"enabled"`
				Disabled []struct {
					Name string `json:"name"`
				} `json:"disabled"`
			} `json:"multiPoint"`
		} `json:"plugins"`
		PluginConfig []struct {
			Name string         `json:"name"`
			Args map[string]any `json:"args"`
		} `json:"pluginConfig"`
	} `json:"profiles"`
}

// decodePluginArgs decodes args strictly, with Go's JSON decoder
// refusing unknown fields, and then checks the names case by case (Go's
// decoder matches them regardless of case, the scheduler's does not) and
// that none is set to its zero value (the chart writes only args that are
// set): re-encoded, the args must be what was rendered.
func decodePluginArgs(t *testing.T, args map[string]any) PluginArgs {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var got PluginArgs
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("plugin args %s: %v", raw, err)
	}
	again, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(again, &back); err != nil {
		t.Fatal(err)
	}
	var rendered map[string]any
	if err := json.Unmarshal(raw, &rendered); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rendered, back); diff != "" {
		t.Errorf("plugin args not exactly the plugin's fields, or set to a zero value (-rendered +as the plugin reads them):\n%s", diff)
	}
	return got
}

// pluginConfig parses a plugin-mode KubeSchedulerConfiguration strictly
// and returns it with the Regosched plugin's args.
func pluginConfig(t *testing.T, text []byte) (schedulerConfiguration, PluginArgs) {
	t.Helper()
	var cfg schedulerConfiguration
	if err := yaml.UnmarshalStrict(text, &cfg); err != nil {
		t.Fatalf("scheduler configuration: %v", err)
	}
	if len(cfg.Profiles) != 1 || len(cfg.Profiles[0].PluginConfig) != 1 || cfg.Profiles[0].PluginConfig[0].Name != "Regosched" {
		t.Fatalf("want one profile with pluginConfig Regosched alone: %+v", cfg.Profiles)
	}
	return cfg, decodePluginArgs(t, cfg.Profiles[0].PluginConfig[0].Args)
}

// The policy volumes of a pod: the same in the scheduler's pod (mode
// plugin) as in regosched's, at the same paths.
var policyVolumes = []string{"policy-verification-key", "policy-bearer-token", "policy-data"}

// mounts returns a container's volumeMounts by volume name.
func mounts(c map[string]any) map[string]any {
	out := map[string]any{}
	ms, _ := c["volumeMounts"].([]any)
	for _, m := range ms {
		out[m.(map[string]any)["name"].(string)] = m
	}
	return out
}

// podSpec returns the pod template's spec of a Deployment.
func podSpec(t *testing.T, objs []Object, name string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "Deployment" && dig(o, "metadata")["name"] == name {
			return dig(o, "spec", "template", "spec")
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

// mode: plugin, for the policy values of mode extender: the scheduler runs
// regosched-scheduler with the Regosched plugin, whose args say what
// regosched's flags say (exactly the plugin's fields, only those set), and
// has the files they name mounted where regosched has them; regosched runs
// beside it with the flags it has in mode extender, but --verbs=false for
// --soft-rules; no Service; the NetworkPolicy opens no verb port.
func TestChartPluginMode(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name string
		// set and setJSON are the values of both modes; mode=plugin is
		// added for the plugin render.
		set, setJSON []string
		want         PluginArgs
		weight       int
		// volumes the scheduler has beyond config and tmp.
		volumes []string
		// extra are the scheduler's own extraVolumes' names.
		extra []string
		// rolls: policy content in values (data, a key) is in the
		// scheduler's pod template, so a change restarts it.
		rolls bool
	}{
		{
			name:   "defaults",
			want:   PluginArgs{LogLevel: "info"},
			weight: 5,
		},
		{
			name: "bundle server, signed bundles, bearer token",
			set: []string{
				"policy.url=https://bundles.example.com/regosched.tar.gz",
				"policy.verificationKey.existingSecret=bundle-key", "policy.verificationKey.secretKey=pub.pem",
				"policy.verificationKey.keyId=ci", "policy.verificationKey.signingAlg=ES256", "policy.verificationKey.scope=prod",
				"policy.bearerToken.existingSecret=bundle-token", "logLevel=debug",
			},
			want: PluginArgs{
				Policy:                  "https://bundles.example.com/regosched.tar.gz",
				PolicyVerificationKey:   "/etc/regosched/policy-verification-key/pub.pem",
				PolicyVerificationKeyID: "ci",
				PolicySigningAlg:        "ES256",
				PolicyScope:             "prod",
				PolicyBearerTokenFile:   "/etc/regosched/policy-bearer-token/token",
				LogLevel:                "debug",
			},
			weight:  5,
			volumes: []string{"policy-verification-key", "policy-bearer-token"},
		},
		{
			// The companion answers no verbs, so it gets no --shadow-policy.
			name:   "shadow policy",
			set:    []string{"policy.shadowUrl=https://bundles.example.com/shadow.tar.gz"},
			want:   PluginArgs{ShadowPolicy: "https://bundles.example.com/shadow.tar.gz", LogLevel: "info"},
			weight: 5,
		},
		{
			// A key id that YAML would read as a number stays a string.
			name: "key in values, numeric key id, plain http allowed",
			set: []string{
				"policy.url=http://bundles.example.com/regosched.tar.gz", "policy.insecure=true",
				"policy.verificationKey.value=-----BEGIN PUBLIC KEY-----",
			},
			setJSON: []string{`policy.verificationKey.keyId="2024"`},
			want: PluginArgs{
				Policy:                  "http://bundles.example.com/regosched.tar.gz",
				PolicyInsecure:          true,
				PolicyVerificationKey:   "/etc/regosched/policy-verification-key/key.pem",
				PolicyVerificationKeyID: "2024",
				PolicySigningAlg:        "RS256",
				LogLevel:                "info",
			},
			weight:  5,
			volumes: []string{"policy-verification-key"},
			rolls:   true,
		},
		{
			// JSON numbers reach the chart as floats: 4194304, not
			// 4.194304e+06.
			name: "policy data, every other arg, a weight",
			set:  []string{"plugin.weight=2"},
			setJSON: []string{
				`policyData={"weights":{"node_spread":3}}`,
				`plugin.args={"policyPoll":"5s","policyMinDelay":"20s","policyMaxDelay":"40s","policyLongPollingTimeout":"1m",` +
					`"policyStartTimeout":"2m","policyCACert":"/etc/regosched/bundle-ca/ca.crt","policyMaxBytes":4194304,` +
					`"policyMaxTotalBytes":67108864,"policyMaxEntries":500,"policyRunTests":true,"syncTimeout":"3m"}`,
				`scheduler.extraVolumes=[{"name":"bundle-ca","configMap":{"name":"bundle-ca"}}]`,
				`scheduler.extraVolumeMounts=[{"name":"bundle-ca","mountPath":"/etc/regosched/bundle-ca","readOnly":true}]`,
			},
			want: PluginArgs{
				PolicyData:               "/etc/regosched/policy-data/data.json",
				PolicyPoll:               "5s",
				PolicyMinDelay:           "20s",
				PolicyMaxDelay:           "40s",
				PolicyLongPollingTimeout: "1m",
				PolicyStartTimeout:       "2m",
				PolicyCACert:             "/etc/regosched/bundle-ca/ca.crt",
				PolicyMaxBytes:           4194304,
				PolicyMaxTotalBytes:      67108864,
				PolicyMaxEntries:         500,
				PolicyRunTests:           true,
				LogLevel:                 "info",
				SyncTimeout:              "3m",
			},
			weight:  2,
			volumes: []string{"policy-data"},
			extra:   []string{"bundle-ca"},
			rolls:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extender := Render{Set: tt.set, SetJSON: tt.setJSON}
			plugin := Render{Set: append([]string{"mode=plugin"}, tt.set...), SetJSON: tt.setJSON}
			lint(t, root, plugin)
			ext := chartObjects(t, root, extender)
			objs := chartObjects(t, root, plugin)

			// The scheduler: regosched-scheduler, kube-scheduler's flags.
			c := container(t, objs, "regosched-scheduler")
			if want := "ghcr.io/regosched/regosched-scheduler:" + repoVersion(t, root); c["image"] != want {
				t.Errorf("scheduler image %v, want %s (the chart's appVersion)", c["image"], want)
			}
			wantCommand := []any{"/regosched-scheduler", "--config=/etc/kubernetes/regosched/kube-scheduler-config.yaml", "--bind-address=0.0.0.0", "--v=2"}
			if diff := cmp.Diff(wantCommand, c["command"]); diff != "" {
				t.Errorf("scheduler command (-want +got):\n%s", diff)
			}
			if _, ok := c["args"]; ok {
				t.Errorf("scheduler args %v: the flags are in command, as kube-scheduler's", c["args"])
			}

			// Its configuration: one profile, the plugin at every point,
			// exactly the args wanted; the lease of mode extender.
			cfg, args := pluginConfig(t, schedulerConfig(t, objs))
			if diff := cmp.Diff(tt.want, args); diff != "" {
				t.Errorf("plugin args (-want +got):\n%s", diff)
			}
			if cfg.APIVersion != "kubescheduler.config.k8s.io/v1" || cfg.Kind != "KubeSchedulerConfiguration" {
				t.Errorf("%s %s", cfg.APIVersion, cfg.Kind)
			}
			p := cfg.Profiles[0]
			if p.SchedulerName != "regosched" {
				t.Errorf("schedulerName %q", p.SchedulerName)
			}
			if e := p.Plugins.MultiPoint.Enabled; len(e) != 1 || e[0].Name != "Regosched" || e[0].Weight != tt.weight {
				t.Errorf("multiPoint.enabled %+v, want Regosched alone, weight %d", e, tt.weight)
			}
			// Regosched's PostFilter runs default preemption, which never
			// evicts a protected pod; the stock one would.
			if d := p.Plugins.MultiPoint.Disabled; len(d) != 1 || d[0].Name != "DefaultPreemption" {
				t.Errorf("multiPoint.disabled %+v, want DefaultPreemption alone", d)
			}
			var extCfg schedulerConfiguration
			if err := yaml.Unmarshal(schedulerConfig(t, ext), &extCfg); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(extCfg.LeaderElection, cfg.LeaderElection); diff != "" || !cfg.LeaderElection.LeaderElect {
				t.Errorf("leader election (-extender +plugin):\n%s", diff)
			}

			// The files the args name: the companion's volumes, at its
			// paths; nothing else of the companion's.
			wantVolumes := volumes(t, ext, "regosched")
			gotVolumes := volumes(t, objs, "regosched-scheduler")
			companionMounts := mounts(container(t, ext, "regosched"))
			schedulerMounts := mounts(c)
			for _, v := range policyVolumes {
				_, has := gotVolumes[v]
				if want := slices.Contains(tt.volumes, v); has != want {
					t.Errorf("scheduler volume %s: %v, want %v", v, has, want)
					continue
				}
				if !has {
					continue
				}
				if diff := cmp.Diff(wantVolumes[v], gotVolumes[v]); diff != "" {
					t.Errorf("scheduler volume %s (-regosched's +scheduler's):\n%s", v, diff)
				}
				if diff := cmp.Diff(companionMounts[v], schedulerMounts[v]); diff != "" {
					t.Errorf("scheduler mount %s (-regosched's +scheduler's):\n%s", v, diff)
				}
			}
			wantNames := append([]string{"config", "tmp"}, tt.volumes...)
			wantNames = append(wantNames, tt.extra...)
			if diff := cmp.Diff(slices.Sorted(slices.Values(wantNames)), slices.Sorted(maps.Keys(gotVolumes))); diff != "" {
				t.Errorf("scheduler volumes (-want +got):\n%s", diff)
			}
			secrets := slices.Contains(tt.volumes, "policy-verification-key") || slices.Contains(tt.volumes, "policy-bearer-token")
			if got := dig(podSpec(t, objs, "regosched-scheduler"), "securityContext")["fsGroup"]; (got == float64(65532)) != secrets {
				t.Errorf("scheduler fsGroup %v with Secret volumes %v: want 65532 exactly when the 0440 Secret files must be readable", got, secrets)
			}

			var annotations map[string]any
			for _, o := range objs {
				if Key(o) == "Deployment regosched-system/regosched-scheduler" {
					annotations = dig(o, "spec", "template", "metadata", "annotations")
				}
			}
			if _, got := annotations["checksum/policy"]; got != tt.rolls {
				t.Errorf("scheduler annotation checksum/policy: %v, want %v", got, tt.rolls)
			}

			// The companion: mode extender's flags, --verbs=false for
			// --soft-rules; only the health port.
			wantArgs := slices.Clone(container(t, ext, "regosched")["args"].([]any))
			i := slices.Index(wantArgs, any("--soft-rules=filter"))
			if i < 0 {
				t.Fatalf("extender args %v lack --soft-rules=filter", wantArgs)
			}
			wantArgs[i] = "--verbs=false"
			// The shadow is judged beside the plugin's filter, not the
			// companion's, which has no verbs.
			wantArgs = slices.DeleteFunc(wantArgs, func(a any) bool { return strings.HasPrefix(a.(string), "--shadow-policy=") })
			companion := container(t, objs, "regosched")
			if diff := cmp.Diff(wantArgs, companion["args"]); diff != "" {
				t.Errorf("companion args (-want +got):\n%s", diff)
			}
			wantPorts := []any{map[string]any{"name": "health", "containerPort": float64(8081), "protocol": "TCP"}}
			if diff := cmp.Diff(wantPorts, companion["ports"]); diff != "" {
				t.Errorf("companion ports (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(volumes(t, ext, "regosched"), volumes(t, objs, "regosched")); diff != "" {
				t.Errorf("companion volumes (-extender +plugin):\n%s", diff)
			}

			// The objects: mode extender's but the Service.
			var wantKeys, gotKeys []string
			for _, o := range ext {
				if k := Key(o); k != "Service regosched-system/regosched" {
					wantKeys = append(wantKeys, k)
				}
			}
			for _, o := range objs {
				gotKeys = append(gotKeys, Key(o))
			}
			slices.Sort(wantKeys)
			slices.Sort(gotKeys)
			if diff := cmp.Diff(wantKeys, gotKeys); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

// mode: plugin with default values renders deploy/plugin's scheduler
// objects (kustomize, deploy/scheduler's with regosched-scheduler's image
// and configuration), with the chart's intended differences.
func TestChartPluginRendersDeployPlugin(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	r := Render{Set: []string{"mode=plugin"}}
	want := normalizeKustomize(t, kustomizeObjects(t, root, "deploy/plugin"))
	delete(want, "Namespace regosched-system")
	got := normalizeChart(t, chartObjects(t, root, r))
	if len(want) == 0 {
		t.Fatal("kustomize build deploy/plugin: no objects")
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("chart: no %s", k)
			continue
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s (-deploy/plugin +chart):\n%s", k, diff)
		}
	}
}

// The scheduler's ServiceAccount has kube-scheduler's own rights and
// nothing of regosched's (no eviction, no Secrets, no pod patch); the
// companion keeps its own but binding pods.
func TestChartPluginAccess(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	objs := chartObjects(t, root, Render{Set: []string{
		"mode=plugin", "repair.mode=on", "redisRoles.podSecrets.enabled=true", "redisRoles.podSecrets.namespaces={shop}",
	}})
	const sa = "regosched-scheduler"
	var refs []string
	for _, o := range objs {
		kind, _ := o["kind"].(string)
		if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
			continue
		}
		subjects, _ := o["subjects"].([]any)
		bound := false
		for _, s := range subjects {
			s := s.(map[string]any)
			if s["kind"] == "ServiceAccount" && s["name"] == sa {
				bound = true
			}
		}
		if !bound {
			continue
		}
		ref := dig(o, "roleRef")
		refs = append(refs, ref["kind"].(string)+" "+ref["name"].(string))
		// A role of the chart's own: what does it grant?
		ns, _ := dig(o, "metadata")["namespace"].(string)
		key := ref["kind"].(string) + " " + ref["name"].(string)
		if ref["kind"] == "Role" {
			key = "Role " + ns + "/" + ref["name"].(string)
		}
		if role := find(objs, key); role != nil {
			for _, r := range role["rules"].([]any) {
				r := r.(map[string]any)
				if !cmp.Equal(r["resources"], []any{"leases"}) {
					t.Errorf("%s grants %v to the scheduler: only its Lease is wanted", key, r)
				}
			}
		}
	}
	slices.Sort(refs)
	wantRefs := []string{
		"ClusterRole system:kube-scheduler",
		"ClusterRole system:volume-scheduler",
		"Role extension-apiserver-authentication-reader",
		"Role regosched-scheduler:leader-election",
	}
	if diff := cmp.Diff(wantRefs, refs); diff != "" {
		t.Errorf("roles bound to ServiceAccount %s (-want +got):\n%s", sa, diff)
	}
	// The companion: eviction (repair.mode=on), Secrets in shop, pod
	// patch; no binding.
	has := func(key string, resource, verb string) bool {
		return slices.ContainsFunc(rules(t, objs, key), func(r any) bool {
			m := r.(map[string]any)
			return slices.Contains(m["resources"].([]any), any(resource)) && slices.Contains(m["verbs"].([]any), any(verb))
		})
	}
	for _, c := range []struct {
		key, resource, verb string
		want                bool
	}{
		{"ClusterRole regosched", "pods/binding", "create", false},
		{"ClusterRole regosched", "pods/eviction", "create", true},
		{"ClusterRole regosched", "pods", "patch", true},
		{"Role shop/regosched-redis-secrets", "secrets", "get", true},
	} {
		if got := has(c.key, c.resource, c.verb); got != c.want {
			t.Errorf("%s: %s %s: %v, want %v", c.key, c.verb, c.resource, got, c.want)
		}
	}
	// Nobody reaches the verb port.
	np := find(objs, "NetworkPolicy regosched-system/regosched")
	if np == nil {
		t.Fatal("no NetworkPolicy")
	}
	health := []any{map[string]any{
		"from": []any{map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"monitoring"}},
		}}}},
		"ports": []any{map[string]any{"port": float64(8081), "protocol": "TCP"}},
	}}
	if diff := cmp.Diff(health, dig(np, "spec")["ingress"]); diff != "" {
		t.Errorf("NetworkPolicy ingress (-want +got):\n%s", diff)
	}
	// And with no health namespaces, none at all (not a missing list).
	np = find(chartObjects(t, root, Render{Set: []string{"mode=plugin"}, SetJSON: []string{"networkPolicy.health.namespaces=[]"}}), "NetworkPolicy regosched-system/regosched")
	if got, ok := dig(np, "spec")["ingress"].([]any); !ok || len(got) != 0 {
		t.Errorf("NetworkPolicy ingress %#v, want []", dig(np, "spec")["ingress"])
	}
}

// Another release names the scheduler's lease, the companion's Lease and
// ConfigMaps after itself, in mode plugin as in mode extender.
func TestChartPluginReleaseName(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	objs := chartObjects(t, root, Render{Release: "blue", Namespace: "sched", Set: []string{"mode=plugin", "replicas=2"}})
	cm := find(objs, "ConfigMap sched/blue-regosched-scheduler-config")
	if cm == nil {
		t.Fatal("no ConfigMap sched/blue-regosched-scheduler-config")
	}
	cfg, _ := pluginConfig(t, []byte(dig(cm, "data")["kube-scheduler-config.yaml"].(string)))
	if le := cfg.LeaderElection; le.ResourceNamespace != "sched" || le.ResourceName != "blue-regosched-scheduler" {
		t.Errorf("scheduler lease %+v, want sched/blue-regosched-scheduler", le)
	}
	args := container(t, objs, "blue-regosched")["args"].([]any)
	for _, want := range []string{"--verbs=false", "--leader-elect", "--leader-elect-name=blue-regosched", "--redis-roles-configmap=blue-regosched-redis-roles", "--repair-configmap=blue-regosched-repairs"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("companion args %v lack %s", args, want)
		}
	}
	if find(objs, "PodDisruptionBudget sched/blue-regosched") == nil {
		t.Error("no PodDisruptionBudget for 2 companion replicas")
	}
	if find(objs, "Service sched/blue-regosched") != nil {
		t.Error("a Service in mode plugin")
	}
}

// mode: extender, set or not, renders the same bytes.
func TestChartModeExtenderIsTheDefault(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
	defer cancel()
	for _, set := range [][]string{nil, {"replicas=2", "tls.enabled=true", "softRules=prioritize"}} {
		def, err := Render{Set: set}.Template(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		explicit, err := Render{Set: append([]string{"mode=extender"}, set...)}.Template(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(def, explicit) {
			t.Errorf("--set %v: mode=extender renders other bytes than the default", set)
		}
	}
}

// Values that mean nothing in mode plugin are refused, not ignored; a
// misspelt or chart-set plugin arg too.
func TestChartPluginRefusesValues(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	tests := []struct {
		name    string
		set     []string
		setJSON []string
		want    string
	}{
		{name: "mode misspelt", set: []string{"mode=plugins"}, want: "/mode"},
		{name: "mutual TLS", set: []string{"tls.enabled=true"}, want: "tls: mode plugin has no connection to protect"},
		{name: "cert-manager", set: []string{"tls.certManager.enabled=true"}, want: "tls: mode plugin has no connection to protect"},
		{name: "soft rules by prioritize", set: []string{"softRules=prioritize"}, want: "softRules=prioritize: mode plugin has no extender verbs"},
		{name: "extender weight", set: []string{"scheduler.extender.weight=3"}, want: "scheduler.extender: mode plugin has no extender entry; set plugin.weight"},
		{name: "extender timeout", set: []string{"scheduler.extender.httpTimeout=10s"}, want: "scheduler.extender: mode plugin has no extender entry"},
		{name: "extender fails open", set: []string{"scheduler.extender.ignorable=true"}, want: "the plugin cannot fail open"},
		{name: "stock scheduler image", set: []string{"scheduler.image.tag=v1.37.2"}, want: "set regoschedScheduler.image instead"},
		{name: "arg the chart sets", set: []string{"plugin.args.policy=/etc/bundle.tar.gz"}, want: "plugin.args.policy: the chart sets it from policy.url"},
		{name: "log level as an arg", set: []string{"plugin.args.logLevel=debug"}, want: "plugin.args.logLevel: the chart sets it from logLevel"},
		{name: "arg misspelt", set: []string{"plugin.args.policyPol=10s"}, want: "additional properties 'policyPol' not allowed"},
		{name: "duration not a string", set: []string{"plugin.args.syncTimeout=10"}, want: "/plugin/args/syncTimeout"},
		{name: "weight of zero", set: []string{"plugin.weight=0"}, want: "/plugin/weight"},
		{name: "image misspelt", set: []string{"regoschedScheduler.image.tags=v1"}, want: "additional properties 'tags' not allowed"},
		{
			name: "bundle path not mounted into the scheduler", set: []string{"policy.url=/etc/regosched/bundle/policy.tar.gz"},
			setJSON: []string{`extraVolumeMounts=[{"name":"bundle","mountPath":"/etc/regosched/bundle"}]`, `extraVolumes=[{"name":"bundle","emptyDir":{}}]`},
			want:    "policy.url=/etc/regosched/bundle/policy.tar.gz is a file the scheduler reads with mode plugin: mount it into the scheduler with scheduler.extraVolumes",
		},
		{name: "shadow bundle path not mounted into the scheduler", set: []string{"policy.shadowUrl=/etc/shadow/bundle.tar.gz"},
			want: "policy.shadowUrl=/etc/shadow/bundle.tar.gz is a file the scheduler reads with mode plugin"},
		{name: "CA not mounted into the scheduler", set: []string{"plugin.args.policyCACert=/etc/ca/ca.crt"}, want: "plugin.args.policyCACert=/etc/ca/ca.crt is a file the scheduler reads"},
		{name: "decision log file not mounted into the scheduler", set: []string{"decisionLog.target=/var/log/regosched/decisions.log"},
			want: "decisionLog.target=/var/log/regosched/decisions.log is a file the scheduler reads"},
		{name: "decision log CA not mounted into the scheduler", set: []string{"decisionLog.target=https://logs.example", "plugin.args.decisionLog.caCert=/etc/logs-ca/ca.crt"},
			want: "plugin.args.decisionLog.caCert=/etc/logs-ca/ca.crt is a file the scheduler reads"},
		{name: "decision log target as an arg", set: []string{"decisionLog.target=stdout", "plugin.args.decisionLog.target=stdout"}, want: "additional properties 'target' not allowed"},
		{name: "decision log settings with no target", set: []string{"plugin.args.decisionLog.timeout=2s"}, want: "plugin.args.decisionLog: set decisionLog.target"},
		{name: "decision log mask mode", set: []string{"decisionLog.target=stdout", "plugin.args.decisionLog.maskMode=hash"}, want: "/plugin/args/decisionLog/maskMode"},
		// As in mode extender.
		{name: "policyData with a signed bundle", set: []string{"policy.verificationKey.existingSecret=k", "policyData.weights.node_spread=2"}, want: "policyData cannot be combined with policy.verificationKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
			defer cancel()
			r := Render{Set: append([]string{"mode=plugin"}, tt.set...), SetJSON: tt.setJSON}
			_, err := r.Template(ctx, root)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("helm template --set %v --set-json %v: error %v, want one containing %q", r.Set, r.SetJSON, err, tt.want)
			}
		})
	}
	// A bundle path mounted into the scheduler is rendered.
	objs := chartObjects(t, root, Render{Set: []string{"mode=plugin", "policy.url=/etc/regosched/bundle/policy.tar.gz"}, SetJSON: []string{
		`extraVolumeMounts=[{"name":"bundle","mountPath":"/etc/regosched/bundle"}]`, `extraVolumes=[{"name":"bundle","configMap":{"name":"bundle"}}]`,
		`scheduler.extraVolumeMounts=[{"name":"bundle","mountPath":"/etc/regosched/bundle/"}]`, `scheduler.extraVolumes=[{"name":"bundle","configMap":{"name":"bundle"}}]`,
	}})
	if _, args := pluginConfig(t, schedulerConfig(t, objs)); args.Policy != "/etc/regosched/bundle/policy.tar.gz" {
		t.Errorf("policy arg %q", args.Policy)
	}
}

// decisionLog.* in mode plugin: the plugin arg decisionLog says what the
// companion's --decision-log* flags say in mode extender, with the HTTP
// settings of plugin.args.decisionLog added; the companion, which decides
// nothing in mode plugin, gets no --decision-log flag.
func TestChartPluginDecisionLog(t *testing.T) {
	skipShort(t)
	root := repoRoot(t)
	half, none := 0.5, 0
	tests := []struct {
		name         string
		set, setJSON []string
		want         *PluginDecisionLog
		wantFlags    []string // the companion's in mode extender
	}{
		{name: "off", want: nil},
		{
			name: "an OPA service, every setting",
			set: []string{"decisionLog.target=https://logs.example", "decisionLog.bufferSize=500", "decisionLog.flushInterval=1s",
				"plugin.args.decisionLog.timeout=2s", "plugin.args.decisionLog.maskMode=replace", "plugin.args.decisionLog.insecure=true",
				"plugin.args.decisionLog.bearerTokenFile=/etc/logs-token/token"},
			setJSON: []string{`decisionLog.sample=0.5`, `decisionLog.maskLabels=["team","owner"]`, `plugin.args.decisionLog.maxRetries=0`,
				`plugin.args.decisionLog.uploadLimitBytes=65536`,
				`scheduler.extraVolumes=[{"name":"logs-token","secret":{"secretName":"logs-token"}}]`,
				`scheduler.extraVolumeMounts=[{"name":"logs-token","mountPath":"/etc/logs-token","readOnly":true}]`},
			want: &PluginDecisionLog{Target: "https://logs.example", Sample: &half, MaskLabels: []string{"team", "owner"}, MaskMode: "replace",
				BufferSize: 500, FlushInterval: "1s", Timeout: "2s", MaxRetries: &none, UploadLimitBytes: 65536,
				BearerTokenFile: "/etc/logs-token/token", Insecure: true},
			wantFlags: []string{"--decision-log=https://logs.example", "--decision-log-sample=0.5", "--decision-log-mask-labels=team,owner",
				"--decision-log-buffer-size=500", "--decision-log-flush-interval=1s"},
		},
		{
			name: "a file in the scheduler's pod",
			set:  []string{"decisionLog.target=/var/log/regosched/decisions.log"},
			setJSON: []string{`scheduler.extraVolumes=[{"name":"decisions","emptyDir":{}}]`,
				`scheduler.extraVolumeMounts=[{"name":"decisions","mountPath":"/var/log/regosched"}]`},
			want: &PluginDecisionLog{Target: "/var/log/regosched/decisions.log", Sample: new(1.0), BufferSize: 10000, FlushInterval: "5s"},
			wantFlags: []string{"--decision-log=/var/log/regosched/decisions.log", "--decision-log-sample=1",
				"--decision-log-buffer-size=10000", "--decision-log-flush-interval=5s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plugin := Render{Set: append([]string{"mode=plugin"}, tt.set...), SetJSON: tt.setJSON}
			lint(t, root, plugin)
			_, args := pluginConfig(t, schedulerConfig(t, chartObjects(t, root, plugin)))
			if diff := cmp.Diff(tt.want, args.DecisionLog); diff != "" {
				t.Errorf("plugin arg decisionLog (-want +got):\n%s", diff)
			}
			for _, a := range container(t, chartObjects(t, root, plugin), "regosched")["args"].([]any) {
				if strings.HasPrefix(a.(string), "--decision-log") {
					t.Errorf("companion flag %s in mode plugin: it decides nothing", a)
				}
			}
			// Mode extender, the same values but the plugin's: the flags.
			var set []string
			for _, s := range tt.set {
				if !strings.HasPrefix(s, "plugin.") {
					set = append(set, s)
				}
			}
			var setJSON []string
			for _, s := range tt.setJSON {
				if !strings.HasPrefix(s, "plugin.") && !strings.HasPrefix(s, "scheduler.") {
					setJSON = append(setJSON, s)
				}
			}
			var gotFlags []string
			for _, a := range container(t, chartObjects(t, root, Render{Set: set, SetJSON: setJSON}), "regosched")["args"].([]any) {
				if strings.HasPrefix(a.(string), "--decision-log") {
					gotFlags = append(gotFlags, a.(string))
				}
			}
			if diff := cmp.Diff(tt.wantFlags, gotFlags); diff != "" {
				t.Errorf("companion's --decision-log flags in mode extender (-want +got):\n%s", diff)
			}
		})
	}
}
