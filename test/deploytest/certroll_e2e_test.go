//go:build e2e

package deploytest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/ops/certroll"
)

// On a real API server, the objects the chart renders for mutual TLS let
// regosched's ServiceAccount roll the scheduler as internal/ops/certroll does
// (its watch of the one Secret by a field selector, its merge patch of the
// one Deployment) and nothing more: RBAC refuses other Secrets and
// Deployments, and admission policy <release>-scheduler-patch refuses any
// change of the scheduler's Deployment but the certificate annotation.
func TestCertRollAccessOnAPIServer(t *testing.T) {
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
	defer cancel()
	c := startCluster(t, ctx)

	const ns, secretName, scheduler = "regosched-system", "regosched-scheduler-client-tls", "regosched-scheduler"
	objs := chartObjects(t, root, Render{Set: []string{"tls.enabled=true", "replicas=2"}})
	admin := c.Client()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyObjects(t, ctx, c, objs, []string{
		"ServiceAccount " + ns + "/regosched",
		"ServiceAccount " + ns + "/" + scheduler,
		"Role " + ns + "/regosched-cert-roll",
		"RoleBinding " + ns + "/regosched-cert-roll",
		"ValidatingAdmissionPolicy regosched-scheduler-patch",
		"ValidatingAdmissionPolicyBinding regosched-scheduler-patch",
		"Deployment " + ns + "/" + scheduler,
	}, nil)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns},
		Data:       map[string][]byte{"ca.crt": []byte("CA 1"), "tls.crt": []byte("client 1"), "tls.key": []byte("key 1")},
	}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// regosched's ServiceAccount, as its pod would be.
	sa := impersonate(t, c, ns, "regosched")

	// The policy takes effect a moment after it is created: wait for its
	// refusal of another image.
	image := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"kube-scheduler","image":"registry.example.com/evil:1"}]}}}}`)
	var refusal error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, refusal = sa.AppsV1().Deployments(ns).Patch(ctx, scheduler, types.StrategicMergePatchType, image, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return refusal != nil, nil
	}); err != nil {
		t.Fatalf("a patch of the scheduler's image by regosched was never refused: %v", err)
	}
	if !strings.Contains(refusal.Error(), "regosched may change only the annotation regosched.io/client-cert-sha256") || !strings.Contains(refusal.Error(), "spec.template") {
		t.Errorf("patch of the image: %v, want the admission policy's refusal", refusal)
	}

	roll := certroll.Config{Client: sa, Namespace: ns, Secret: secretName, Deployment: scheduler}
	annotations := func() (deployment, template string) {
		t.Helper()
		d, err := admin.AppsV1().Deployments(ns).Get(ctx, scheduler, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Annotations[certroll.Annotation], d.Spec.Template.Annotations[certroll.Annotation]
	}
	t.Run("reconcile: record, then roll", func(t *testing.T) {
		s, err := sa.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("regosched reads its Secret: %v", err)
		}
		if got, err := certroll.Reconcile(ctx, roll, s); err != nil || got != certroll.Recorded {
			t.Fatalf("Reconcile = %v, %v; want %v", got, err, certroll.Recorded)
		}
		sum, _ := certroll.Fingerprint(s)
		if d, tpl := annotations(); d != sum || tpl != "" {
			t.Errorf("annotations %q on the Deployment, %q on its pods; want %q, none", d, tpl, sum)
		}
		s.Data["tls.crt"] = []byte("client 2")
		if s, err = admin.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, err := certroll.Reconcile(ctx, roll, s); err != nil || got != certroll.Rolled {
			t.Fatalf("Reconcile = %v, %v; want %v", got, err, certroll.Rolled)
		}
		sum, _ = certroll.Fingerprint(s)
		if d, tpl := annotations(); d != sum || tpl != sum {
			t.Errorf("annotations %q on the Deployment, %q on its pods; want %q on both", d, tpl, sum)
		}
	})
	t.Run("run: the watch of one Secret rolls on a change", func(t *testing.T) {
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- certroll.Run(runCtx, roll) }()
		defer func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		s, err := admin.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data["ca.crt"] = []byte("CA 2")
		if s, err = admin.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		sum, _ := certroll.Fingerprint(s)
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			_, tpl := annotations()
			return tpl == sum, nil
		}); err != nil {
			d, tpl := annotations()
			t.Fatalf("the scheduler was not rolled for the new CA: annotations %q, %q, want %q", d, tpl, sum)
		}
	})
	t.Run("refused", func(t *testing.T) {
		tests := []struct {
			name string
			do   func(context.Context) error
			want string // in the error; "forbidden" for RBAC
		}{
			{
				name: "another Secret",
				do: func(ctx context.Context) error {
					_, err := sa.CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{})
					return err
				},
				want: "forbidden",
			},
			{
				name: "every Secret of the namespace",
				do: func(ctx context.Context) error {
					_, err := sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
					return err
				},
				want: "forbidden",
			},
			{
				name: "another Deployment",
				do: func(ctx context.Context) error {
					_, err := sa.AppsV1().Deployments(ns).Patch(ctx, "regosched", types.MergePatchType, []byte(`{"metadata":{"annotations":{"a":"b"}}}`), metav1.PatchOptions{})
					return err
				},
				want: "forbidden",
			},
			{
				name: "the scheduler's command",
				do: func(ctx context.Context) error {
					_, err := sa.AppsV1().Deployments(ns).Patch(ctx, scheduler, types.StrategicMergePatchType,
						[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"kube-scheduler","command":["sh"]}]}}}}`), metav1.PatchOptions{})
					return err
				},
				want: "regosched may change only the annotation regosched.io/client-cert-sha256 of Deployment regosched-system/regosched-scheduler and its pod template, not spec.template",
			},
			{
				name: "the labels of the scheduler's pods",
				do: func(ctx context.Context) error {
					_, err := sa.AppsV1().Deployments(ns).Patch(ctx, scheduler, types.MergePatchType, []byte(`{"spec":{"template":{"metadata":{"labels":{"x":"y"}}}}}`), metav1.PatchOptions{})
					return err
				},
				want: "regosched may change only the annotation regosched.io/client-cert-sha256 of Deployment regosched-system/regosched-scheduler and its pod template, not spec.template",
			},
			{
				name: "another annotation",
				do: func(ctx context.Context) error {
					_, err := sa.AppsV1().Deployments(ns).Patch(ctx, scheduler, types.MergePatchType, []byte(`{"spec":{"template":{"metadata":{"annotations":{"x":"y"}}}}}`), metav1.PatchOptions{})
					return err
				},
				want: "regosched may change only the annotation regosched.io/client-cert-sha256",
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.do(ctx)
				switch {
				case err == nil:
					t.Fatal("allowed")
				case tt.want == "forbidden":
					if !apierrors.IsForbidden(err) {
						t.Errorf("error %v, want Forbidden", err)
					}
				case !strings.Contains(err.Error(), tt.want):
					t.Errorf("error %v, want one containing %q", err, tt.want)
				}
			})
		}
	})
}
