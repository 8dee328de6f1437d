package certroll

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const ns = "regosched-system"

func secret(ca, crt string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "client-tls", Namespace: ns}, Data: map[string][]byte{}}
	if ca != "" {
		s.Data["ca.crt"] = []byte(ca)
	}
	if crt != "" {
		s.Data[corev1.TLSCertKey] = []byte(crt)
	}
	return s
}

func deployment(recorded, template string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "scheduler", Namespace: ns}}
	if recorded != "" {
		d.Annotations = map[string]string{Annotation: recorded}
	}
	if template != "" {
		d.Spec.Template.Annotations = map[string]string{Annotation: template}
	}
	return d
}

func sum(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	f, ok := Fingerprint(s)
	if !ok {
		t.Fatal("no fingerprint")
	}
	return f
}

func TestFingerprint(t *testing.T) {
	base := sum(t, secret("CA", "CRT"))
	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		same   bool
		ok     bool
	}{
		{"same contents", secret("CA", "CRT"), true, true},
		{"new certificate", secret("CA", "CRT2"), false, true},
		{"new CA", secret("CA2", "CRT"), false, true},
		{"bytes moved between the keys", secret("CAC", "RT"), false, true},
		{"no certificate yet", secret("CA", ""), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Fingerprint(tc.secret)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && (got == base) != tc.same {
				t.Errorf("same fingerprint as the base = %v, want %v", got == base, tc.same)
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	current := secret("CA", "CRT")
	now := sum(t, current)
	for _, tc := range []struct {
		name         string
		secret       *corev1.Secret
		deployment   *appsv1.Deployment
		want         Outcome
		wantRecorded string
		wantTemplate string
		wantPatches  int
	}{
		{
			name: "first sight records, rolls nothing", secret: current, deployment: deployment("", ""),
			want: Recorded, wantRecorded: now, wantTemplate: "", wantPatches: 1,
		},
		{
			name: "same certificate", secret: current, deployment: deployment(now, now),
			want: Unchanged, wantRecorded: now, wantTemplate: now,
		},
		{
			name: "renewed certificate rolls the pods", secret: current, deployment: deployment("old", "old"),
			want: Rolled, wantRecorded: now, wantTemplate: now, wantPatches: 1,
		},
		{
			name: "recorded but never rolled before", secret: current, deployment: deployment("old", ""),
			want: Rolled, wantRecorded: now, wantTemplate: now, wantPatches: 1,
		},
		{
			name: "no certificate yet", secret: secret("CA", ""), deployment: deployment("old", "old"),
			want: NoCertificate, wantRecorded: "old", wantTemplate: "old",
		},
		{
			name: "no Secret", deployment: deployment("old", "old"),
			want: NoCertificate, wantRecorded: "old", wantTemplate: "old",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.deployment)
			var patches int
			client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				return false, nil, nil
			})
			c := Config{Client: client, Namespace: ns, Secret: "client-tls", Deployment: "scheduler"}
			got, err := Reconcile(context.Background(), c, tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			d, err := client.AppsV1().Deployments(ns).Get(context.Background(), "scheduler", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantRecorded, d.Annotations[Annotation]); diff != "" {
				t.Errorf("Deployment's record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTemplate, d.Spec.Template.Annotations[Annotation]); diff != "" {
				t.Errorf("pod template's annotation (-want +got):\n%s", diff)
			}
			if patches != tc.wantPatches {
				t.Errorf("patches = %d, want %d", patches, tc.wantPatches)
			}
		})
	}
}

func TestReconcileMissingDeployment(t *testing.T) {
	c := Config{Client: fake.NewClientset(), Namespace: ns, Secret: "client-tls", Deployment: "scheduler"}
	if _, err := Reconcile(context.Background(), c, secret("CA", "CRT")); err == nil {
		t.Fatal("want an error for a missing Deployment")
	}
}

func TestCheck(t *testing.T) {
	client := fake.NewClientset()
	for _, tc := range []struct {
		name string
		c    Config
		ok   bool
	}{
		{"complete", Config{Client: client, Namespace: ns, Secret: "s", Deployment: "d"}, true},
		{"no client", Config{Namespace: ns, Secret: "s", Deployment: "d"}, false},
		{"no namespace", Config{Client: client, Secret: "s", Deployment: "d"}, false},
		{"no deployment", Config{Client: client, Namespace: ns, Secret: "s"}, false},
		{"no secret", Config{Client: client, Namespace: ns, Deployment: "d"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Check(); (err == nil) != tc.ok {
				t.Errorf("Check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// A renewal seen by the watch rolls the Deployment, and only while leading.
func TestRunRollsOnRenewal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leading bool
	}{{"leader", true}, {"standby", false}} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(secret("CA", "CRT"), deployment("", ""))
			var leading atomic.Bool
			leading.Store(tc.leading)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, Config{
					Client: client, Namespace: ns, Secret: "client-tls", Deployment: "scheduler",
					Leading: leading.Load, Resync: 20 * time.Millisecond,
				})
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			annotations := func() (recorded, template string) {
				d, err := client.AppsV1().Deployments(ns).Get(context.Background(), "scheduler", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return d.Annotations[Annotation], d.Spec.Template.Annotations[Annotation]
			}
			if !tc.leading {
				time.Sleep(200 * time.Millisecond)
				if r, tpl := annotations(); r != "" || tpl != "" {
					t.Fatalf("a standby patched the Deployment: %q %q", r, tpl)
				}
				return
			}
			waitFor(t, func() bool { r, _ := annotations(); return r != "" })
			if _, tpl := annotations(); tpl != "" {
				t.Fatalf("first sight rolled the pods: template annotation %q", tpl)
			}
			renewed := secret("CA", "CRT-renewed")
			if _, err := client.CoreV1().Secrets(ns).Update(context.Background(), renewed, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			want := sum(t, renewed)
			waitFor(t, func() bool { _, tpl := annotations(); return tpl == want })
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
