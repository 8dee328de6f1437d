//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/test/deploytest"
	"github.com/regosched/regosched/test/fixture"
)

// policyEffectiveTimeout bounds the wait for a new ValidatingAdmissionPolicy
// and its binding to be enforced (the API server compiles them from an
// informer, a moment after they are stored).
const policyEffectiveTimeout = time.Minute

// rbacKinds are the objects of a rendering that govern what the extender's
// ServiceAccount may do; only these are applied.
var rbacKinds = []string{
	"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}

// rbacDeployment is one way of deploying the extender: its rendered
// objects and the names they give the ServiceAccount and its own objects.
type rbacDeployment struct {
	name      string
	render    func(t *testing.T, ctx context.Context) []byte
	namespace string // of the ServiceAccount, Lease and ConfigMap
	account   string // ServiceAccount
	lease     string
	configMap string // of --redis-roles
	policy    string // prefix of the admission policies' names
}

// The extender's ServiceAccount, as deploy/extender and the chart grant and
// narrow it, on a real API server: it may write the role, shard and leader
// labels (and their annotations) of pods and nothing else of any pod, its
// own Lease and ConfigMap and no other, and events as regosched only.
func TestRBACOfTheExtender(t *testing.T) {
	deployments := []rbacDeployment{
		{
			name: "deploy/extender",
			render: func(t *testing.T, ctx context.Context) []byte {
				out, err := stack.Cluster().Kubectl(ctx, "kustomize", filepath.Join(stack.RepoRoot(), "deploy/extender"))
				if err != nil {
					t.Fatal(err)
				}
				return out
			},
			namespace: "regosched-system", account: "regosched", lease: "regosched",
			configMap: "regosched-redis-roles", policy: "regosched",
		},
		{
			name: "chart release blue",
			render: func(t *testing.T, ctx context.Context) []byte {
				out, err := deploytest.Render{Release: "blue", Namespace: "rbac-blue"}.Template(ctx, stack.RepoRoot())
				if err != nil {
					t.Fatal(err)
				}
				return out
			},
			namespace: "rbac-blue", account: "blue-regosched", lease: "blue-regosched",
			configMap: "blue-regosched-redis-roles", policy: "blue-regosched",
		},
	}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			const tenant = "rbac-tenant"
			ctx := setup(t, tenant, d.namespace)
			applyRBAC(t, ctx, d.render(t, ctx))
			admin := stack.Client()
			cfg := stack.Cluster().RESTConfig()
			cfg.Impersonate.UserName = "system:serviceaccount:" + d.namespace + ":" + d.account
			sa, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}

			redis := unscheduledPod(t, ctx, admin, tenant, "redis-0")
			own := unscheduledPod(t, ctx, admin, d.namespace, "regosched-0")
			system := unscheduledPod(t, ctx, admin, "kube-system", "rbac-"+d.account)
			probe := unscheduledPod(t, ctx, admin, tenant, "probe")
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
				defer cancel()
				_ = admin.CoreV1().Pods("kube-system").Delete(ctx, system.Name, metav1.DeleteOptions{})
			})
			podPolicy, ownPolicy, eventPolicy := d.policy+"-pod-patch", d.policy+"-own-objects", d.policy+"-events"

			// Bindings are enforced a moment after they are stored: wait
			// for each policy's first denial, on objects of no other use.
			// Each attempt changes the label anew: the API server admits a
			// patch that changes nothing without asking the policies, so
			// repeating one that passed before enforcement would pass forever.
			attempt := 0
			waitDenied(t, ctx, podPolicy, func() error {
				attempt++
				return patchPod(ctx, sa, probe, fmt.Sprintf(`{"metadata":{"labels":{"app":"evil-%d"}}}`, attempt))
			})
			waitDenied(t, ctx, ownPolicy, func() error {
				err := createConfigMap(ctx, sa, d.namespace, "probe")
				_ = admin.CoreV1().ConfigMaps(d.namespace).Delete(ctx, "probe", metav1.DeleteOptions{})
				return err
			})
			waitDenied(t, ctx, eventPolicy, func() error {
				return createEvent(ctx, sa, probe, "default-scheduler")
			})

			// The ConfigMaps and Leases the cases create, gone when the test
			// ends so that it can run again on the same cluster.
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
				defer cancel()
				for _, name := range []string{"other", d.configMap, "regosched-scheduler-config"} {
					if err := admin.CoreV1().ConfigMaps(d.namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						t.Errorf("clean-up: %v", err)
					}
				}
				for _, name := range []string{"other", d.lease, d.lease + "-2"} {
					if err := admin.CoordinationV1().Leases(d.namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						t.Errorf("clean-up: %v", err)
					}
				}
			})
			// Objects of another name, which regosched must not touch.
			if err := createConfigMap(ctx, admin, d.namespace, "other"); err != nil {
				t.Fatal(err)
			}
			if err := createLease(ctx, admin, d.namespace, "other"); err != nil {
				t.Fatal(err)
			}

			tests := []struct {
				name string
				do   func() error
				want rbacOutcome
			}{
				// Pods: what internal/redis/redisroles and internal/plumbing/leader send.
				{"role labels and source of a tenant's pod", func() error {
					return patchPod(ctx, sa, redis, fmt.Sprintf(`{"metadata":{"uid":%q,"labels":{"regosched.io/role":"master","regosched.io/shard":"0"},"annotations":{"regosched.io/role-source":"redis"}}}`, redis.UID))
				}, allowedToAll},
				{"role label removed", func() error {
					return patchPod(ctx, sa, redis, `{"metadata":{"labels":{"regosched.io/shard":null}}}`)
				}, allowedToAll},
				{"leader label on its own pod", func() error {
					return patchPod(ctx, sa, own, fmt.Sprintf(`{"metadata":{"labels":{"regosched.io/leader":"true"},"annotations":{"regosched.io/leader-lease":"%s/%s"}}}`, d.namespace, d.lease))
				}, allowedToAll},
				{"role label of a kube-system pod", func() error {
					return patchPod(ctx, sa, system, `{"metadata":{"labels":{"regosched.io/role":"replica"}}}`)
				}, allowedToAll},
				{"another label", func() error {
					return patchPod(ctx, sa, redis, `{"metadata":{"labels":{"app":"other"}}}`)
				}, deniedBy(podPolicy, "not app")},
				{"another label of a kube-system pod", func() error {
					return patchPod(ctx, sa, system, `{"metadata":{"labels":{"component":"kube-apiserver"}}}`)
				}, deniedBy(podPolicy, "not component")},
				{"a role label and another one", func() error {
					return patchPod(ctx, sa, redis, `{"metadata":{"labels":{"regosched.io/role":"replica","tier":"x"}}}`)
				}, deniedBy(podPolicy, "not tier")},
				{"an unrelated annotation", func() error {
					return patchPod(ctx, sa, redis, `{"metadata":{"annotations":{"example.com/note":"x"}}}`)
				}, deniedBy(podPolicy, "not example.com/note")},
				{"spec", func() error {
					return patchPod(ctx, sa, redis, `{"spec":{"activeDeadlineSeconds":5}}`)
				}, deniedBy(podPolicy, "not its spec")},
				{"spec of a kube-system pod", func() error {
					return patchPod(ctx, sa, system, `{"spec":{"activeDeadlineSeconds":5}}`)
				}, deniedBy(podPolicy, "not its spec")},
				{"finalizers", func() error {
					return patchPod(ctx, sa, redis, `{"metadata":{"finalizers":["example.com/hold"]}}`)
				}, deniedBy(podPolicy, "finalizers or owners")},
				{"leader label of a tenant's pod", func() error {
					return patchPod(ctx, sa, redis, `{"metadata":{"labels":{"regosched.io/leader":"true"}}}`)
				}, deniedBy(podPolicy, "leader label only on pods of its own namespace")},
				{"delete a pod", func() error {
					return sa.CoreV1().Pods(redis.Namespace).Delete(ctx, redis.Name, metav1.DeleteOptions{})
				}, forbiddenByRBAC},

				// Its ConfigMap and Lease, and no others.
				{"create its ConfigMap", func() error {
					return createConfigMap(ctx, sa, d.namespace, d.configMap)
				}, allowedToAll},
				{"update its ConfigMap", func() error {
					return updateConfigMap(ctx, sa, d.namespace, d.configMap)
				}, allowedToAll},
				{"create a ConfigMap of another name", func() error {
					return createConfigMap(ctx, sa, d.namespace, "regosched-scheduler-config")
				}, deniedBy(ownPolicy, "not configmaps "+d.namespace+"/regosched-scheduler-config")},
				{"update a ConfigMap of another name", func() error {
					return updateConfigMap(ctx, sa, d.namespace, "other")
				}, forbiddenByRBAC},
				{"read a ConfigMap of another name", func() error {
					_, err := sa.CoreV1().ConfigMaps(d.namespace).Get(ctx, "other", metav1.GetOptions{})
					return err
				}, forbiddenByRBAC},
				{"create a ConfigMap in a tenant's namespace", func() error {
					return createConfigMap(ctx, sa, tenant, d.configMap)
				}, forbiddenByRBAC},
				{"create its Lease", func() error {
					return createLease(ctx, sa, d.namespace, d.lease)
				}, allowedToAll},
				{"update its Lease", func() error {
					return updateLease(ctx, sa, d.namespace, d.lease)
				}, allowedToAll},
				{"create a Lease of another name", func() error {
					return createLease(ctx, sa, d.namespace, d.lease+"-2")
				}, deniedBy(ownPolicy, "not leases "+d.namespace+"/"+d.lease+"-2")},
				{"update a Lease of another name", func() error {
					return updateLease(ctx, sa, d.namespace, "other")
				}, forbiddenByRBAC},

				// Events: events.k8s.io, as regosched, about pods.
				{"event as regosched", func() error {
					return createEvent(ctx, sa, redis, "regosched")
				}, allowedToAll},
				{"event as the scheduler", func() error {
					return createEvent(ctx, sa, redis, "default-scheduler")
				}, deniedBy(eventPolicy, "only as reportingController regosched")},
				{"core v1 event", func() error {
					_, err := sa.CoreV1().Events(tenant).Create(ctx, &corev1.Event{
						ObjectMeta:     metav1.ObjectMeta{GenerateName: "rbac-"},
						InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: tenant, Name: redis.Name},
						Reason:         "Test", Message: "core", Type: corev1.EventTypeNormal,
					}, metav1.CreateOptions{})
					return err
				}, forbiddenByRBAC},

				// Nothing else.
				{"read a Secret", func() error {
					_, err := sa.CoreV1().Secrets(tenant).Get(ctx, "any", metav1.GetOptions{})
					return err
				}, forbiddenByRBAC},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					tt.want.check(t, tt.do())
				})
			}

			// What the allowed patches left: the labels written, nothing else.
			got, err := admin.CoreV1().Pods(tenant).Get(ctx, redis.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantLabels := map[string]string{"app": "rbac", "regosched.io/role": "master"}
			if !maps.Equal(got.Labels, wantLabels) || got.Spec.ActiveDeadlineSeconds != nil || len(got.Finalizers) > 0 {
				t.Errorf("pod %s/%s after the test: labels %v (want %v), activeDeadlineSeconds %v, finalizers %v",
					tenant, redis.Name, got.Labels, wantLabels, got.Spec.ActiveDeadlineSeconds, got.Finalizers)
			}
		})
	}
}

// rbacOutcome is what a request of the ServiceAccount must meet: allowed,
// denied by an admission policy with a message containing text, or
// forbidden by RBAC.
type rbacOutcome struct {
	ok           bool
	policy, text string
}

var (
	allowedToAll    = rbacOutcome{ok: true}
	forbiddenByRBAC = rbacOutcome{}
)

func deniedBy(policy, text string) rbacOutcome { return rbacOutcome{policy: policy, text: text} }

func (o rbacOutcome) check(t *testing.T, err error) {
	t.Helper()
	switch {
	case o.ok:
		if err != nil {
			t.Errorf("refused: %v", err)
		}
	case o.policy != "":
		// The message, not the policy's name alone: an expression that
		// fails to evaluate is refused by the policy too (failurePolicy).
		if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+o.policy+"'") || !strings.Contains(err.Error(), o.text) {
			t.Errorf("error %v, want a denial by ValidatingAdmissionPolicy %s saying %q", err, o.policy, o.text)
		} else {
			t.Logf("denied: %v", err)
		}
	default:
		if !apierrors.IsForbidden(err) || strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			t.Errorf("error %v, want Forbidden by RBAC", err)
		} else {
			t.Logf("forbidden: %v", err)
		}
	}
}

// applyRBAC applies the RBAC and admission objects of a rendering, and
// deletes them when the test ends.
func applyRBAC(t *testing.T, ctx context.Context, rendered []byte) {
	t.Helper()
	objs, err := deploytest.Objects(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var stream strings.Builder
	var kinds []string
	for _, o := range objs {
		kind, _ := o["kind"].(string)
		if !slices.Contains(rbacKinds, kind) {
			continue
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		stream.WriteString("---\n")
		stream.Write(b)
		kinds = append(kinds, kind)
	}
	for _, k := range rbacKinds {
		if !slices.Contains(kinds, k) {
			t.Fatalf("no %s rendered (have %v)", k, kinds)
		}
	}
	// Not under t.TempDir(): kubectl -f splits its argument at commas.
	dir, err := os.MkdirTemp("", "regosched-rbac-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "rbac.yaml")
	if err := os.WriteFile(file, []byte(stream.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := stack.Cluster().Kubectl(ctx, "apply", "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("applied:\n%s", out)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if out, err := stack.Cluster().Kubectl(ctx, "delete", "--ignore-not-found", "-f", file); err != nil {
			t.Errorf("clean-up: %v\n%s", err, out)
		}
	})
}

// unscheduledPod creates a pod that no scheduler places (a scheduler name
// nobody runs), labelled app=rbac.
func unscheduledPod(t *testing.T, ctx context.Context, c kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	p := fixture.MakePod().Namespace(ns).Name(name).Label("app", "rbac").Schedulable().SchedulerName("rbac-test-nobody").Obj()
	created, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func patchPod(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, patch string) error {
	_, err := c.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func createConfigMap(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	return err
}

// updateConfigMap replaces the ConfigMap's data without reading it first,
// as internal/redis/redisroles does.
func updateConfigMap(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	_, err := c.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "updated"},
	}, metav1.UpdateOptions{})
	return err
}

func createLease(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	holder := "rbac-test"
	_, err := c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	return err
}

// updateLease reads and writes the Lease back, as leader election does.
func updateLease(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	l, err := c.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	holder := "rbac-test-2"
	l.Spec.HolderIdentity = &holder
	_, err = c.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// createEvent publishes an events.k8s.io event about pod p, as the audit's
// recorder does, in the name of controller.
func createEvent(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, controller string) error {
	_, err := c.EventsV1().Events(p.Namespace).Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: "rbac-"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: controller,
		ReportingInstance:   controller + "-0",
		Action:              "Check",
		Reason:              "Test",
		Regarding:           corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Note:                "written by TestRBACOfTheExtender",
		Type:                corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	return err
}

// waitDenied retries attempt until the named policy refuses it.
func waitDenied(t *testing.T, ctx context.Context, policy string, attempt func() error) {
	t.Helper()
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, policyEffectiveTimeout, true, func(context.Context) (bool, error) {
		last = attempt()
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy '"+policy+"'"), nil
	})
	if err != nil {
		t.Fatalf("ValidatingAdmissionPolicy %s not enforced within %s; last answer: %v", policy, policyEffectiveTimeout, last)
	}
	t.Logf("%s enforced after %s", policy, time.Since(start).Round(time.Millisecond))
}
