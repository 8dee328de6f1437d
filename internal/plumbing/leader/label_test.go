package leader

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/test/fixture"
)

// labelled lists the pods that carry the leader label.
func labelled(t *testing.T, client kubernetes.Interface) []string {
	t.Helper()
	pods, err := client.CoreV1().Pods("regosched-system").List(context.Background(), metav1.ListOptions{LabelSelector: Label + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.Annotations[LeaseAnnotation] == "regosched-system/regosched" {
			names = append(names, p.Name)
		}
	}
	return names
}

// TestLeaderLabelFollowsTheLease: the label the Service selects is on the
// leader's pod alone, at every step: a stale label left by a dead process is
// removed, and the label moves with the lease.
func TestLeaderLabelFollowsTheLease(t *testing.T) {
	// Both carry the label from processes that died without cleaning up;
	// another regosched in the namespace, with its own Lease, leads too.
	client := fake.NewClientset(
		fixture.MakePod().Namespace("regosched-system").Name("regosched-a").Label("app", "regosched").
			Label(Label, "true").Annotation(LeaseAnnotation, "regosched-system/regosched").Obj(),
		fixture.MakePod().Namespace("regosched-system").Name("regosched-b").Label("app", "regosched").
			Label(Label, "true").Annotation(LeaseAnnotation, "regosched-system/regosched").Obj(),
		fixture.MakePod().Namespace("regosched-system").Name("other-0").Label("app", "regosched").
			Label(Label, "true").Annotation(LeaseAnnotation, "regosched-system/other").Obj(),
	)
	log, _ := logtest.NewNullLogger()
	cfg := func(id string) Config {
		return Config{Namespace: "regosched-system", Name: "regosched", Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
			PodNamespace: "regosched-system", PodName: "regosched-" + id}
	}
	a, err := New(client, cfg("a"), log)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(client, cfg("b"), log)
	if err != nil {
		t.Fatal(err)
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneA := make(chan struct{})
	go func() { a.Run(ctxA); close(doneA) }()
	poll(t, "a to lead", a.Leading)
	poll(t, "the label on a alone", func() bool { return cmp.Equal(labelled(t, client), []string{"regosched-a"}) })

	go b.Run(ctxB)
	time.Sleep(500 * time.Millisecond)
	if diff := cmp.Diff([]string{"regosched-a"}, labelled(t, client)); diff != "" {
		t.Errorf("labelled pods while a leads and b campaigns (-want +got):\n%s", diff)
	}

	// Stepping down: the label goes first, while a still holds the lease.
	if err := a.StepDown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := labelled(t, client); len(got) != 0 || !a.Leading() {
		t.Errorf("after StepDown: labelled %v, leading %v; want no label while still leading", got, a.Leading())
	}
	stopA()
	<-doneA
	poll(t, "b to lead", b.Leading)
	poll(t, "the label on b alone", func() bool { return cmp.Equal(labelled(t, client), []string{"regosched-b"}) })
	other, err := client.CoreV1().Pods("regosched-system").Get(context.Background(), "other-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if other.Labels[Label] != "true" {
		t.Error("the leader label of another instance (another Lease) was removed")
	}
}
