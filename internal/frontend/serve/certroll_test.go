package serve

import (
	"context"
	"net/http"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/certroll"
	"github.com/regosched/regosched/internal/plumbing/leader"
)

// TestServeRollsTheSchedulerOnRenewal: with --scheduler-client-secret and
// --scheduler-deployment, the leader records the scheduler's certificate and
// rolls its Deployment when the Secret is renewed.
func TestServeRollsTheSchedulerOnRenewal(t *testing.T) {
	client := haCluster()
	bg := context.Background()
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: haNamespace, Name: "client-tls"},
		Data: map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("CRT")}}
	if _, err := client.CoreV1().Secrets(haNamespace).Create(bg, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().Deployments(haNamespace).Create(bg, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: haNamespace, Name: "scheduler"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	addr := freeAddr(t)
	log, _ := logtest.NewNullLogger()
	opts := Options{
		Listen: addr, Client: client, Policy: bundles.Config{Default: regosched.DefaultPolicy()},
		URLPrefix: "/scheduler", Version: "test", Verbs: true, SchedulerName: "regosched", LeaderElect: true,
		CertRoll: CertRollOptions{Secret: "client-tls", Deployment: "scheduler"},
		Log:      log,
	}
	opts.Leader = leader.Config{Namespace: haNamespace, Name: "regosched", Identity: "regosched-a",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		PodNamespace: haNamespace, PodName: "regosched-a"}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	defer stopRun(t, cancel, done)
	until(t, "ready", func() bool { return get("http://"+addr+"/readyz") == http.StatusOK })

	annotations := func() (recorded, template string) {
		d, err := client.AppsV1().Deployments(haNamespace).Get(bg, "scheduler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Annotations[certroll.Annotation], d.Spec.Template.Annotations[certroll.Annotation]
	}
	until(t, "the certificate recorded", func() bool { r, _ := annotations(); return r != "" })
	if _, tpl := annotations(); tpl != "" {
		t.Fatalf("the scheduler was rolled at first sight (template annotation %q)", tpl)
	}
	secret.Data["tls.crt"] = []byte("CRT-renewed")
	want, _ := certroll.Fingerprint(secret)
	// The update is sent again until seen: a fake clientset's watch that
	// starts after the informer's list misses what happened in between,
	// which a real API server replays from the list's resourceVersion.
	polls := 0
	until(t, "the scheduler rolled", func() bool {
		if polls%50 == 0 {
			if _, err := client.CoreV1().Secrets(haNamespace).Update(bg, secret, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		polls++
		_, tpl := annotations()
		return tpl == want
	})
}
