package leader

import (
	"context"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

func TestOneLeaderThenHandOver(t *testing.T) {
	client := fake.NewClientset()
	log, _ := logtest.NewNullLogger()
	cfg := func(id string) Config {
		return Config{Namespace: "regosched-system", Name: "regosched", Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
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
	go b.Run(ctxB)

	// b campaigns for several retry periods and must not lead while a renews.
	time.Sleep(500 * time.Millisecond)
	if b.Leading() {
		t.Fatal("two leaders at once")
	}

	// a steps down (released on cancel): b takes over and a reports the loss.
	stopA()
	<-doneA
	select {
	case <-a.Lost():
	default:
		t.Error("Lost() not closed after a stopped leading")
	}
	if a.Leading() {
		t.Error("a still leading after it stopped")
	}
	poll(t, "b to lead", b.Leading)
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
