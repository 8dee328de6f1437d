//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/test/deploytest"
	"github.com/regosched/regosched/test/fixture"
)

// Both clusters are called "cache" and are confined to the same three
// nodes. Three masters per cluster on three nodes means every node holds a
// master of namespace A, so namespace B's masters can only be placed if
// regosched keeps the clusters apart by namespace; a fourth master of A is
// refused, so the rule does hold within a cluster.
func TestRedisClustersAreIndependentPerNamespace(t *testing.T) {
	const nsA, nsB = "e2e-redis-a", "e2e-redis-b"
	ctx := setup(t, nsA, nsB)
	three := nodes(t, ctx, 3)

	masterNodes := map[string]map[string]string{} // namespace -> shard -> node
	for _, ns := range []string{nsA, nsB} {
		masterNodes[ns] = map[string]string{}
		for shard := range 3 {
			sh := fmt.Sprint(shard)
			m := place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-"+sh+"-master").Redis("cache", "master", sh).Schedulable().OnNodes(three...).Obj())
			masterNodes[ns][sh] = m
			r := place(t, ctx,
				fixture.MakePod().Namespace(ns).Name("cache-"+sh+"-replica").Redis("cache", "replica", sh).Schedulable().OnNodes(three...).Obj(),
			)
			if r == m {
				t.Errorf("%s shard %s: master and replica both on %s", ns, sh, m)
			}
		}
	}
	// A fourth master has no node left in its own cluster...
	reason := refuse(t, ctx, fixture.MakePod().Namespace(nsA).Name("cache-3-master").Redis("cache", "master", "3").Schedulable().OnNodes(three...).Obj())
	if want := "redis: master " + nsA + "/cache-"; !strings.Contains(reason, want) {
		t.Errorf("FailedScheduling message %q does not contain %q", reason, want)
	}
	noViolations(t, ctx, nsA, nsB)

	// The point of the test: B's masters do share nodes with A's masters.
	aMasters := map[string]bool{}
	for _, n := range masterNodes[nsA] {
		aMasters[n] = true
	}
	if len(aMasters) != 3 {
		t.Fatalf("masters of %s on %v, want three different nodes", nsA, masterNodes[nsA])
	}
	for sh, n := range masterNodes[nsB] {
		if !aMasters[n] {
			t.Errorf("master of shard %s of %s on %s, which holds no master of %s: the test did not force sharing", sh, nsB, n, nsA)
		}
	}
}

// Five data pods confined to three nodes: three are placed one per node,
// two stay pending with regosched's reason. Master-role pods of the same
// cluster are unconstrained: two of them on one node that also holds a data
// pod are fine.
func TestElasticsearchDataOnePerNode(t *testing.T) {
	const ns = "e2e-es"
	ctx := setup(t, ns)
	three := nodes(t, ctx, 3)

	used := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("es-data-%d", i)
		n := place(t, ctx, fixture.MakePod().Namespace(ns).Name(name).Elasticsearch("es", "data").Schedulable().OnNodes(three...).Obj())
		if prev, ok := used[n]; ok {
			t.Errorf("%s and %s both on %s", prev, name, n)
		}
		used[n] = name
	}
	pending := []string{"es-data-3", "es-data-4"}
	for _, name := range pending {
		reason := refuse(t, ctx, fixture.MakePod().Namespace(ns).Name(name).Elasticsearch("es", "data").Schedulable().OnNodes(three...).Obj())
		for _, want := range []string{"elasticsearch: data " + ns + "/es-data-", "of cluster es already on this node"} {
			if !strings.Contains(reason, want) {
				t.Errorf("%s: FailedScheduling message %q does not contain %q", name, reason, want)
			}
		}
	}

	for _, name := range []string{"es-master-0", "es-master-1"} {
		if n := place(t, ctx,
			fixture.MakePod().Namespace(ns).Name(name).Elasticsearch("es", "master").Schedulable().OnNodes(three[0]).Obj(),
		); n != three[0] {
			t.Errorf("%s on %s, want %s", name, n, three[0])
		}
	}
	noViolations(t, ctx, ns)

	// The masters' bindings made the scheduler retry the pending pods;
	// they must still be pending.
	for _, name := range pending {
		p, err := stack.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("%s was bound to %s later", name, p.Spec.NodeName)
		}
	}
}

// Pods that no rule concerns land on a node crowded with Redis and
// Elasticsearch pods, as they would without regosched.
func TestUnrelatedPodsScheduleAsUsual(t *testing.T) {
	const ns, other = "e2e-plain", "e2e-plain-other"
	ctx := setup(t, ns, other)
	node := nodes(t, ctx, 1)[0]

	place(t, ctx, fixture.MakePod().Namespace(ns).Name("x-data-0").Elasticsearch("x", "data").Schedulable().OnNodes(node).Obj())
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("x-0-master").Redis("x", "master", "0").Schedulable().OnNodes(node).Obj())

	tests := []struct {
		name string
		pod  *fixture.PodWrapper
	}{
		{"plain pod", fixture.MakePod().Namespace(ns).Name("plain-0").Schedulable()},
		{"another plain pod", fixture.MakePod().Namespace(ns).Name("plain-1").Schedulable()},
		{"elasticsearch data pod without cluster", fixture.MakePod().Namespace(ns).Name("es-nocluster").Labels(map[string]string{
			fixture.LabelName: "elasticsearch", fixture.LabelComponent: "data"}).Schedulable()},
		{"redis master without cluster", fixture.MakePod().Namespace(ns).Name("redis-nocluster").Labels(map[string]string{
			fixture.LabelName: "redis", fixture.LabelComponent: "master", fixture.LabelShard: "0"}).Schedulable()},
		{"other application, same cluster and role labels", fixture.MakePod().Namespace(ns).Name("web-data").Labels(map[string]string{
			fixture.LabelName: "web", fixture.LabelInstance: "x", fixture.LabelComponent: "data"}).Schedulable()},
		{"redis master of another cluster", fixture.MakePod().Namespace(ns).Name("y-0-master").Redis("y", "master", "0").Schedulable()},
		{"elasticsearch data pod of the same cluster name in another namespace",
			fixture.MakePod().Namespace(other).Name("x-data-0").Elasticsearch("x", "data").Schedulable()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := place(t, ctx, tt.pod.OnNodes(node).Obj()); n != node {
				t.Errorf("bound to %s, want %s", n, node)
			}
		})
	}
	// And one with the whole cluster to choose from.
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("plain-anywhere").Schedulable().Obj())
	noViolations(t, ctx, ns, other)
}

// A replica promoted to master (its labels patched, as a Redis operator
// does on failover) is a master from then on: a new master of the cluster
// and a new replica of its shard must avoid its node.
func TestFailoverRelabelledReplicaIsMaster(t *testing.T) {
	const ns = "e2e-failover"
	ctx := setup(t, ns)
	n := nodes(t, ctx, 3)

	place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-a").Redis("cache", "master", "0").Schedulable().OnNodes(n[0]).Obj())
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-b").Redis("cache", "replica", "0").Schedulable().OnNodes(n[1]).Obj())

	// Before the failover a master of another shard may join the replica.
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("probe").Redis("cache", "master", "1").Schedulable().OnNodes(n[1]).Obj())
	deletePod(t, ctx, ns, "probe")

	// Failover: the master is gone, the replica becomes master.
	deletePod(t, ctx, ns, "cache-0-a")
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{fixture.LabelComponent: "master"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Client().CoreV1().Pods(ns).Patch(ctx, "cache-0-b", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("promoting the replica: %v", err)
	}
	// The label change keeps regosched's pod count: wait for it explicitly.
	if err := stack.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, pod, role, shard string
		reason                 string
	}{
		{"master of another shard", "cache-1-a", "master", "1",
			"redis: master " + ns + "/cache-0-b of cluster cache already on this node"},
		{"replica of the promoted shard", "cache-0-c", "replica", "0",
			"redis: master " + ns + "/cache-0-b of cluster cache (shard 0) already on this node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Offered the promoted pod's node only: refused.
			only := tt.pod + "-only"
			reason := refuse(t, ctx, fixture.MakePod().Namespace(ns).Name(only).Redis("cache", tt.role, tt.shard).Schedulable().OnNodes(n[1]).Obj())
			if !strings.Contains(reason, tt.reason) {
				t.Errorf("FailedScheduling message %q does not contain %q", reason, tt.reason)
			}
			deletePod(t, ctx, ns, only)

			// Offered it and another node: the other node.
			other := n[2]
			if tt.role == "replica" {
				other = n[0]
			}
			pod := fixture.MakePod().Namespace(ns).Name(tt.pod).Redis("cache", tt.role, tt.shard).Schedulable().OnNodes(n[1], other).Obj()
			if got := place(t, ctx, pod); got != other {
				t.Errorf("bound to %s, want %s", got, other)
			}
		})
	}
	noViolations(t, ctx, ns)
}

// With every candidate node holding a data pod of the cluster, one more
// data pod waits; deleting a data pod lets it take that pod's node.
func TestDeletingAPodFreesItsNode(t *testing.T) {
	const ns = "e2e-delete"
	ctx := setup(t, ns)
	three := nodes(t, ctx, 3)

	nodeOf := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("es-data-%d", i)
		nodeOf[name] = place(t, ctx, fixture.MakePod().Namespace(ns).Name(name).Elasticsearch("es", "data").Schedulable().OnNodes(three...).Obj())
	}
	refuse(t, ctx, fixture.MakePod().Namespace(ns).Name("es-data-3").Elasticsearch("es", "data").Schedulable().OnNodes(three...).Obj())

	deletePod(t, ctx, ns, "es-data-1")
	// The delete makes kube-scheduler retry es-data-3 at once, often before
	// regosched's informer has seen the delete: regosched must re-read the
	// stale peer rather than refuse and park the pod for minutes.
	got, err := stack.WaitBound(ctx, ns, "es-data-3", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got != nodeOf["es-data-1"] {
		t.Errorf("es-data-3 bound to %s, want the freed node %s", got, nodeOf["es-data-1"])
	}
	noViolations(t, ctx, ns)
}

// The scheduler configuration says ignorable: false: with regosched down,
// pods wait instead of being placed without the rules; once it is back,
// they are placed by the rules. Each replica must avoid its master's node,
// and the two replicas do not constrain each other, so that placing them
// in a burst after the restart is still decided by the rules alone.
func TestExtenderDownKeepsPodsPending(t *testing.T) {
	const ns = "e2e-down"
	ctx := setup(t, ns)
	all := nodes(t, ctx, 2)
	a, b := all[0], all[1]

	place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Schedulable().OnNodes(a).Obj())
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-1-master").Redis("cache", "master", "1").Schedulable().OnNodes(b).Obj())

	stack.StopExtender()
	t.Cleanup(func() {
		// Later tests need it, whatever happened here.
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := stack.StartExtender(ctx); err != nil {
			t.Errorf("restarting regosched: %v", err)
		}
	})

	replicas := map[string]string{"cache-0-replica": b, "cache-1-replica": a} // name -> the only allowed node
	var created []*corev1.Pod
	for _, name := range slices.Sorted(maps.Keys(replicas)) {
		shard := name[len("cache-") : len("cache-")+1]
		replica := fixture.MakePod().Namespace(ns).Name(name).Redis("cache", "replica", shard).Schedulable().OnNodes(a, b).Obj()
		p, err := stack.Client().CoreV1().Pods(ns).Create(ctx, replica, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, p)
	}
	// The scheduler has tried each pod and failed...
	for _, p := range created {
		var reason string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			reason, err = stack.FailedSchedulingReason(ctx, p)
			return reason != "", err
		})
		if err != nil {
			t.Fatalf("waiting for a FailedScheduling event of %s: %v", p.Name, err)
		}
		t.Logf("%s while regosched is down: %s", p.Name, reason)
	}
	// ...and keeps them pending through its retries. The watch ends by
	// itself rather than by a timeout, which would also cut short the
	// requests made in the last round.
	const watchFor = 6 * time.Second
	until := time.Now().Add(watchFor)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*watchFor, true, func(ctx context.Context) (bool, error) {
		for _, p := range created {
			got, err := stack.Client().CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if got.Spec.NodeName != "" {
				return false, fmt.Errorf("%s bound to %s while regosched is down", p.Name, got.Spec.NodeName)
			}
		}
		return time.Now().After(until), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if err := stack.StartExtender(ctx); err != nil {
		t.Fatal(err)
	}
	for name, want := range replicas {
		got, err := stack.WaitBound(ctx, ns, name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s bound to %s, want %s (its master is on the other node)", name, got, want)
		}
	}
	noViolations(t, ctx, ns)
}

// The manifests under deploy/ are accepted by a real API server of the
// version the project targets (server-side dry run, so admission and
// validation run but nothing is stored).
func TestDeployManifestsAccepted(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		// chart, instead of dir: the Helm chart deploy/helm/regosched
		// rendered with these values for this cluster's version. Objects
		// of kinds this API server does not serve (cert-manager's, the
		// Prometheus operator's; rendered with their --api-versions) are
		// left out of the dry run; their content is checked by
		// test/deploytest.
		chart *deploytest.Render
	}{
		{name: "extender and scheduler", dir: "deploy"},
		{name: "examples", dir: "deploy/examples"},
		{name: "high availability overlay", dir: "deploy/ha"},
		{name: "mutual TLS overlay", dir: "deploy/tls"},
		{name: "regosched-scheduler (framework plugin)", dir: "deploy/plugin"},
		{name: "chart defaults", chart: &deploytest.Render{}},
		{name: "chart HA, mutual TLS, live roles", chart: &deploytest.Render{Set: []string{"replicas=2", "tls.enabled=true", "redisRoles.enabled=true"}}},
		{name: "chart cert-manager, monitoring, bundle server, data, pod secrets", chart: &deploytest.Render{
			Set: []string{
				"tls.certManager.enabled=true", "namespace.create=true",
				"monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true",
				"policy.url=https://bundles.example.com/regosched.tar.gz", "policy.bearerToken.existingSecret=bundle-token",
				"redisRoles.passwordSecret.name=redis-auth", "redisRoles.passwordNamespaces={shop}", "redisRoles.passwordInsecure=true",
				"redisRoles.podSecrets.enabled=true", "redisRoles.podSecrets.namespaces={shop}",
			},
			SetJSON:     []string{`policyData={"weights":{"node_spread":2}}`},
			APIVersions: deploytest.CRDAPIVersions,
		}},
		{name: "chart signed bundle, no NetworkPolicy, no live roles", chart: &deploytest.Render{Set: []string{
			"policy.url=https://bundles.example.com/regosched.tar.gz", "policy.verificationKey.value=-----BEGIN PUBLIC KEY-----",
			"networkPolicy.enabled=false", "redisRoles.enabled=false",
		}}},
		// mode plugin: regosched-scheduler and the companion without verbs.
		{name: "chart mode plugin", chart: &deploytest.Render{Set: []string{"mode=plugin"}}},
		{name: "chart mode plugin, HA, signed bundle server, monitoring, repair, pod secrets, every plugin arg", chart: &deploytest.Render{
			Set: []string{
				"mode=plugin", "replicas=2", "scheduler.replicas=2", "namespace.create=true",
				"policy.url=https://bundles.example.com/regosched.tar.gz", "policy.bearerToken.existingSecret=bundle-token",
				"policy.verificationKey.value=-----BEGIN PUBLIC KEY-----", "policy.verificationKey.scope=prod",
				"monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true",
				"repair.mode=on", "redisRoles.podSecrets.enabled=true", "redisRoles.podSecrets.namespaces={shop}",
			},
			SetJSON: []string{
				`plugin.args={"policyPoll":"5s","policyMinDelay":"20s","policyMaxDelay":"40s","policyLongPollingTimeout":"1m",` +
					`"policyStartTimeout":"2m","policyCACert":"/etc/regosched/bundle-ca/ca.crt","policyMaxBytes":4194304,` +
					`"policyMaxTotalBytes":67108864,"policyMaxEntries":500,"policyRunTests":true,"syncTimeout":"3m"}`,
				`scheduler.extraVolumes=[{"name":"bundle-ca","configMap":{"name":"bundle-ca"}}]`,
				`scheduler.extraVolumeMounts=[{"name":"bundle-ca","mountPath":"/etc/regosched/bundle-ca","readOnly":true}]`,
			},
			APIVersions: deploytest.CRDAPIVersions,
		}},
		{name: "chart mode plugin, data overlay, no health namespaces", chart: &deploytest.Render{
			Set:     []string{"mode=plugin", "logLevel=debug", "plugin.weight=2"},
			SetJSON: []string{`policyData={"weights":{"node_spread":2}}`, `networkPolicy.health.namespaces=[]`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			if tt.chart != nil {
				dryRunChart(t, ctx, *tt.chart)
				return
			}
			dir := filepath.Join(stack.RepoRoot(), tt.dir)
			rendered, err := stack.Cluster().Kubectl(ctx, "kustomize", dir)
			if err != nil {
				t.Fatal(err)
			}
			// Namespaced objects can only be dry-run into a namespace that
			// exists; a dry run of the Namespace object creates nothing.
			objects := objectsIn(t, rendered)
			for _, o := range objects {
				if o.Kind != "Namespace" {
					continue
				}
				if err := stack.EnsureNamespace(ctx, o.Metadata.Name); err != nil {
					t.Fatal(err)
				}
			}
			out, err := stack.Cluster().Kubectl(ctx, "apply", "--dry-run=server", "-k", dir)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != len(objects) {
				t.Errorf("kubectl applied %d objects, kustomize rendered %d:\n%s", len(lines), len(objects), out)
			}
			for _, l := range lines {
				if !strings.HasSuffix(l, "(server dry run)") {
					t.Errorf("unexpected kubectl output line %q", l)
				}
			}
			t.Logf("kubectl apply --dry-run=server -k %s:\n%s", tt.dir, out)
		})
	}
}

// dryRunChart renders the chart with r (from a copy that has the monitoring
// files, placeholders where they are still missing) for this API server's
// version, and applies it with --dry-run=server.
func dryRunChart(t *testing.T, ctx context.Context, r deploytest.Render) {
	t.Helper()
	root := stack.RepoRoot()
	r.Chart = filepath.Join(t.TempDir(), "regosched")
	placeholders, err := deploytest.StageChart(root, r.Chart)
	if err != nil {
		t.Fatal(err)
	}
	if len(placeholders) > 0 {
		t.Logf("chart files not written yet, placeholders used: %v", placeholders)
	}
	// The version the scheduler image follows. The local kube-apiserver is
	// built without version stamping (it reports v0.0.0-master): read the
	// version it is built from.
	mod, err := os.ReadFile(filepath.Join(root, "deploy/local/tools/kubernetes/go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(mod), "\n") {
		// "require k8s.io/kubernetes vX" or, in a block, "k8s.io/kubernetes vX".
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) == 2 && f[0] == "k8s.io/kubernetes" {
			r.KubeVersion = f[1]
		}
	}
	if r.KubeVersion == "" {
		t.Fatal("no k8s.io/kubernetes version in deploy/local/tools/kubernetes/go.mod")
	}
	rendered, err := r.Template(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploytest.Objects(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var stream strings.Builder
	var applied, skipped []string
	for _, o := range objs {
		api, _ := o["apiVersion"].(string)
		if strings.HasPrefix(api, "cert-manager.io/") || strings.HasPrefix(api, "monitoring.coreos.com/") {
			skipped = append(skipped, deploytest.Key(o))
			continue
		}
		if md, ok := o["metadata"].(map[string]any); ok {
			if ns, _ := md["namespace"].(string); ns != "" {
				if err := stack.EnsureNamespace(ctx, ns); err != nil {
					t.Fatal(err)
				}
			}
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		stream.WriteString("---\n")
		stream.Write(b)
		applied = append(applied, deploytest.Key(o))
	}
	// Not under t.TempDir(): kubectl -f splits its argument at the commas
	// a subtest's name puts there.
	dir, err := os.MkdirTemp("", "regosched-chart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "chart.yaml")
	if err := os.WriteFile(file, []byte(stream.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := stack.Cluster().Kubectl(ctx, "apply", "--dry-run=server", "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(applied) {
		t.Errorf("kubectl applied %d objects, the chart rendered %d (%v):\n%s", len(lines), len(applied), applied, out)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, "(server dry run)") {
			t.Errorf("unexpected kubectl output line %q", l)
		}
	}
	t.Logf("helm template %v | kubectl apply --dry-run=server (not served here, not applied: %v):\n%s", r.Set, skipped, out)
}

// object is the identity of a manifest.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// objectsIn parses a multi-document YAML stream, as kubectl kustomize
// prints it.
func objectsIn(t *testing.T, stream []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range strings.Split(string(stream), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("parsing rendered manifests: %v", err)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
	return objs
}

func deletePod(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	if err := stack.DeletePod(ctx, ns, name); err != nil {
		t.Fatal(err)
	}
}

// A pod held in the scheduler's queue by a scheduling gate is described by
// regosched meanwhile, through the real API server's field selector on
// pending pods of the profile; once the gate is lifted, its filter call
// uses that description instead of evaluating one.
func TestPendingPodDescribedAhead(t *testing.T) {
	const ns = "e2e-ahead"
	ctx := setup(t, ns)
	three := nodes(t, ctx, 3)
	const ahead = `regosched_pending_descriptions_total{when="ahead"}`
	before, err := stack.Sample(ctx, ahead)
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := stack.Sample(ctx, "regosched_pending_pods") // other tests' refused pods
	if err != nil {
		t.Fatal(err)
	}
	pod := fixture.MakePod().Namespace(ns).Name("es-data-0").Elasticsearch("es", "data").Schedulable().OnNodes(three...).Obj()
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "regosched.io/e2e"}}
	pods := stack.Client().CoreV1().Pods(ns)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := stack.Sample(ctx, "regosched_pending_pods")
		return n == waiting+1, err
	})
	if err != nil {
		t.Fatalf("waiting for regosched to describe the gated pod: %v", err)
	}
	created.Spec.SchedulingGates = nil
	if _, err := pods.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.WaitBound(ctx, ns, pod.Name, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	after, err := stack.Sample(ctx, ahead)
	if err != nil {
		t.Fatal(err)
	}
	if after != before+1 {
		t.Errorf("%s went from %d to %d, want one more", ahead, before, after)
	}
	if n, err := stack.Sample(ctx, "regosched_pending_pods"); err != nil || n != waiting {
		t.Errorf("regosched_pending_pods = %d, %v once the pod is bound; want %d", n, err, waiting)
	}
}
