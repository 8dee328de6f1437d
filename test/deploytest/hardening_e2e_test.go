//go:build e2e

package deploytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/ops/certroll"
	"github.com/regosched/regosched/test/localcluster"
)

// policyDeadline bounds the wait for a new ValidatingAdmissionPolicy to be
// enforced: the API server compiles it from an informer, a moment after it
// is stored.
const policyDeadline = time.Minute

// startCluster builds (or finds cached) and starts etcd and kube-apiserver.
func startCluster(t *testing.T, ctx context.Context) *localcluster.Cluster {
	t.Helper()
	bins, err := localcluster.Build(ctx, localcluster.BuildOptions{RepoRoot: repoRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := localcluster.Start(ctx, localcluster.Config{Binaries: bins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// applyObjects applies the rendered objects of keys with kubectl (extra are
// more kubectl apply flags); a key the rendering lacks fails the test
// unless optional.
func applyObjects(t *testing.T, ctx context.Context, c *localcluster.Cluster, objs []Object, keys []string, optional map[string]bool, extra ...string) {
	t.Helper()
	var stream strings.Builder
	for _, key := range keys {
		o := find(objs, key)
		if o == nil {
			if optional[key] {
				continue
			}
			t.Fatalf("the rendering has no %s", key)
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		stream.WriteString("---\n")
		stream.Write(b)
	}
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, []byte(stream.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, append(append([]string{"apply"}, extra...), "-f", file)...); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// impersonate returns a client that acts as the ServiceAccount ns/name, with
// the groups its token would carry.
func impersonate(t *testing.T, c *localcluster.Cluster, ns, name string) kubernetes.Interface {
	t.Helper()
	cfg := c.RESTConfig()
	cfg.Impersonate.UserName = "system:serviceaccount:" + ns + ":" + name
	cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sa
}

// waitEnforced retries attempt until policy refuses it.
func waitEnforced(t *testing.T, ctx context.Context, policy string, attempt func(int) error) {
	t.Helper()
	var last error
	n := 0
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, policyDeadline, true, func(context.Context) (bool, error) {
		n++
		last = attempt(n)
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy '"+policy+"'"), nil
	}); err != nil {
		t.Fatalf("ValidatingAdmissionPolicy %s not enforced within %s; last answer: %v", policy, policyDeadline, last)
	}
}

// changed returns the fields a refusal of <release>-scheduler-patch names:
// the list after its last ", not ".
func changed(err error) []string {
	i := strings.LastIndex(err.Error(), ", not ")
	if i < 0 {
		return nil
	}
	return strings.Split(err.Error()[i+len(", not "):], ", ")
}

// On a real API server, admission policy <release>-scheduler-patch lets the
// cert-roll identity (regosched's ServiceAccount) change the annotation
// regosched.io/client-cert-sha256 of the scheduler's Deployment and of its
// pod template, as internal/ops/certroll patches it, and nothing else:
// not spec.replicas, spec.paused, spec.strategy nor any other field of the
// spec or the metadata, nor the record of a server-side applier.
func TestCertRollPolicyPinsTheDeploymentOnAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
	defer cancel()
	c := startCluster(t, ctx)
	const ns, scheduler, policy = "regosched-system", "regosched-scheduler", "regosched-scheduler-patch"
	objs := chartObjects(t, repoRoot(t), Render{Set: []string{"tls.enabled=true", "replicas=2"}})
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Server-side apply, as Helm 4 and GitOps tools do: the Deployment's
	// managedFields then hold an Apply entry, whose next apply would remove
	// what it no longer lists.
	applyObjects(t, ctx, c, objs, []string{
		"Role " + ns + "/regosched-cert-roll",
		"RoleBinding " + ns + "/regosched-cert-roll",
		"ValidatingAdmissionPolicy " + policy,
		"ValidatingAdmissionPolicyBinding " + policy,
		"Deployment " + ns + "/" + scheduler,
	}, nil, "--server-side")
	sa := impersonate(t, c, ns, "regosched")
	patch := func(ctx context.Context, kind types.PatchType, body string) error {
		_, err := sa.AppsV1().Deployments(ns).Patch(ctx, scheduler, kind, []byte(body), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// Each attempt changes the image anew: the API server admits a patch
	// that changes nothing without asking the policies.
	waitEnforced(t, ctx, policy, func(n int) error {
		return patch(ctx, types.StrategicMergePatchType, fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"kube-scheduler","image":"registry.example.com/evil:%d"}]}}}}`, n))
	})

	a := certroll.Annotation
	tests := []struct {
		name  string
		kind  types.PatchType
		patch string
		want  string // "": allowed; else in the policy's refusal
	}{
		// What internal/ops/certroll sends: the record on the Deployment
		// alone (it has no annotations yet), then the roll.
		{name: "record: the annotation on the Deployment", kind: types.MergePatchType, patch: `{"metadata":{"annotations":{"` + a + `":"1"}}}`},
		{name: "roll: the annotation on the Deployment and its pod template", kind: types.MergePatchType, patch: `{"metadata":{"annotations":{"` + a + `":"2"}},"spec":{"template":{"metadata":{"annotations":{"` + a + `":"2"}}}}}`},
		{name: "spec.replicas", kind: types.MergePatchType, patch: `{"spec":{"replicas":0}}`, want: "spec.replicas"},
		{name: "spec.replicas up", kind: types.MergePatchType, patch: `{"spec":{"replicas":50}}`, want: "spec.replicas"},
		{name: "spec.paused", kind: types.MergePatchType, patch: `{"spec":{"paused":true}}`, want: "spec.paused"},
		{name: "spec.strategy", kind: types.MergePatchType, patch: `{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}`, want: "spec.strategy"},
		{name: "spec.strategy.rollingUpdate", kind: types.MergePatchType, patch: `{"spec":{"strategy":{"rollingUpdate":{"maxUnavailable":"100%"}}}}`, want: "spec.strategy"},
		{name: "spec.minReadySeconds", kind: types.MergePatchType, patch: `{"spec":{"minReadySeconds":300}}`, want: "spec.minReadySeconds"},
		{name: "spec.progressDeadlineSeconds", kind: types.MergePatchType, patch: `{"spec":{"progressDeadlineSeconds":1}}`, want: "spec.progressDeadlineSeconds"},
		{name: "spec.revisionHistoryLimit", kind: types.MergePatchType, patch: `{"spec":{"revisionHistoryLimit":0}}`, want: "spec.revisionHistoryLimit"},
		{name: "the annotation and spec.replicas", kind: types.MergePatchType, patch: `{"metadata":{"annotations":{"` + a + `":"3"}},"spec":{"replicas":0}}`, want: "spec.replicas"},
		{name: "the scheduler's command", kind: types.StrategicMergePatchType, patch: `{"spec":{"template":{"spec":{"containers":[{"name":"kube-scheduler","command":["sh"]}]}}}}`, want: "spec.template"},
		{name: "the labels of the scheduler's pods", kind: types.MergePatchType, patch: `{"spec":{"template":{"metadata":{"labels":{"x":"y"}}}}}`, want: "spec.template"},
		{name: "another annotation of the pod template", kind: types.MergePatchType, patch: `{"spec":{"template":{"metadata":{"annotations":{"x":"y"}}}}}`, want: "spec.template"},
		{name: "another annotation of the Deployment", kind: types.MergePatchType, patch: `{"metadata":{"annotations":{"x":"y"}}}`, want: "metadata.annotations"},
		{name: "the labels of the Deployment", kind: types.MergePatchType, patch: `{"metadata":{"labels":{"x":"y"}}}`, want: "metadata.labels"},
		{name: "a finalizer", kind: types.MergePatchType, patch: `{"metadata":{"finalizers":["example.com/hold"]}}`, want: "metadata.finalizers"},
		{name: "the server-side applier's managedFields", kind: types.MergePatchType, patch: `{"metadata":{"managedFields":[{}]}}`, want: "metadata.managedFields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := patch(ctx, tt.kind, tt.patch)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want == "":
			case err == nil:
				t.Errorf("allowed, want a refusal naming %s", tt.want)
			case !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") || !slices.Contains(changed(err), tt.want):
				t.Errorf("error %v, want %s's refusal naming %s", err, policy, tt.want)
			}
		})
	}
}

// On a real API server, with repair.mode plan (the chart's default, and
// deploy/'s), regosched's ServiceAccount may dry-run an eviction, as
// internal/ops/repair does (dryRun in the Eviction's deleteOptions) or with
// ?dryRun=All, and nothing more: admission policy <release>-dry-run-evictions
// refuses a real one, which its create on pods/eviction would allow.
// Others' evictions are not its business.
func TestRepairPlanPolicyOnAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
	defer cancel()
	c := startCluster(t, ctx)
	const ns, tenant, policy = "regosched-system", "tenant", "regosched-dry-run-evictions"
	objs := chartObjects(t, repoRoot(t), Render{})
	admin := c.Client()
	for _, n := range []string{ns, tenant} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policyKeys := []string{"ValidatingAdmissionPolicy " + policy, "ValidatingAdmissionPolicyBinding " + policy}
	rendered := find(objs, policyKeys[0]) != nil
	if !rendered {
		// Go on: the cases show what the grant alone allows.
		t.Errorf("the chart renders no %s with repair.mode plan", policyKeys[0])
	}
	applyObjects(t, ctx, c, objs, append([]string{
		"ServiceAccount " + ns + "/regosched",
		"ClusterRole regosched",
		"ClusterRoleBinding regosched",
	}, policyKeys...), map[string]bool{policyKeys[0]: true, policyKeys[1]: true})

	pod := func(name string) *corev1.Pod {
		t.Helper()
		p, err := admin.CoreV1().Pods(tenant).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant},
			// No scheduler places it: no node is needed.
			Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "redis", Image: "redis:7"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sa := impersonate(t, c, ns, "regosched")
	// As internal/ops/repair's evict: this incarnation only, dryRun in the
	// Eviction's deleteOptions when asked.
	evict := func(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, dryRun []string) error {
		return c.PolicyV1().Evictions(tenant).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: tenant, Name: p.Name},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}, DryRun: dryRun},
		})
	}
	if rendered {
		// A pod that does not exist: the policy is asked before the pod
		// is looked up, so nothing is evicted before it is enforced.
		ghost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: "ghost"}}
		waitEnforced(t, ctx, policy, func(int) error { return evict(ctx, sa, ghost, nil) })
	}

	redis := pod("redis-0")
	tests := []struct {
		name string
		do   func(context.Context) error
		want string // "": allowed; else in the policy's refusal
	}{
		{name: "dry run, as the repair asks it", do: func(ctx context.Context) error {
			return evict(ctx, sa, redis, []string{metav1.DryRunAll})
		}},
		{name: "dry run in the request (?dryRun=All)", do: func(ctx context.Context) error {
			return sa.CoreV1().RESTClient().Post().Namespace(tenant).Resource("pods").Name(redis.Name).SubResource("eviction").
				Param("dryRun", metav1.DryRunAll).
				Body(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"}, ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: redis.Name}}).
				Do(ctx).Error()
		}},
		{name: "a real eviction", want: "may only dry-run evictions", do: func(ctx context.Context) error {
			return evict(ctx, sa, redis, nil)
		}},
		{name: "a real eviction with empty options", want: "may only dry-run evictions", do: func(ctx context.Context) error {
			return sa.PolicyV1().Evictions(tenant).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: redis.Name}})
		}},
		{name: "dryRun of another value", want: "may only dry-run evictions", do: func(ctx context.Context) error {
			return evict(ctx, sa, redis, []string{"Some"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(ctx)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want == "":
			case err == nil:
				t.Errorf("allowed, want %s's refusal", policy)
			case !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") || !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %v, want %s's refusal saying %q", err, policy, tt.want)
			}
		})
	}
	// The pod is still there, the same incarnation.
	got, err := admin.CoreV1().Pods(tenant).Get(ctx, redis.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		t.Errorf("pod %s/%s was evicted", tenant, redis.Name)
	case err != nil:
		t.Fatal(err)
	case got.UID != redis.UID || got.DeletionTimestamp != nil:
		t.Errorf("pod %s/%s: uid %s (was %s), deletionTimestamp %v", tenant, redis.Name, got.UID, redis.UID, got.DeletionTimestamp)
	}
	// Anyone else still evicts for real: the policy is regosched's alone.
	other := pod("other-0")
	if err := evict(ctx, admin, other, nil); err != nil {
		t.Errorf("the administrator's eviction: %v", err)
	}
}
