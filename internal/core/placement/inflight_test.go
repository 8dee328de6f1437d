package placement

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// pending returns the policy view of a pending pod of shop/<instance>.
func pending(name, instance string) (*model.Pod, []string) {
	p := fixture.MakePod().Namespace("shop").Name(name).Redis(instance, "master", "").Model()
	keys, _, _ := byInstance(context.Background(), p)
	return p, keys
}

// waitResult is what a WaitForPeers call in a goroutine returned.
type waitResult struct {
	waited  time.Duration
	pending []string
}

func waitAsync(c *Cache, ctx context.Context, keys []string, self *model.Pod) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		d, p := c.WaitForPeers(ctx, keys, self.UID)
		ch <- waitResult{d, names(p)}
	}()
	return ch
}

func TestWaitForPeersReturnsAtOnceWithoutPeersInFlight(t *testing.T) {
	c, _ := startCache(t, byInstance, nil)
	a, keys := pending("cache-0", "cache")
	other, otherKeys := pending("other-0", "other")
	c.Reserve(a, keys, time.Minute, nil)
	c.Reserve(other, otherKeys, time.Minute, nil)

	// The pod itself, and pods of other groups, never hold it back.
	if d, p := c.WaitForPeers(context.Background(), keys, a.UID); len(p) != 0 || d > time.Second {
		t.Errorf("WaitForPeers(self in flight) = %v, %v; want no wait", d, names(p))
	}
	third, thirdKeys := pending("third-0", "third")
	if d, p := c.WaitForPeers(context.Background(), thirdKeys, third.UID); len(p) != 0 || d > time.Second {
		t.Errorf("WaitForPeers(other groups in flight) = %v, %v; want no wait", d, names(p))
	}
	if got := c.InFlight(); got != 2 {
		t.Errorf("InFlight() = %d, want 2", got)
	}
}

func TestWaitForPeersUntilTheInformerSeesTheBinding(t *testing.T) {
	c, client := startCache(t, byInstance, nil)
	a, keys := pending("cache-0", "cache")
	b, _ := pending("cache-1", "cache")
	obj := fixture.MakePod().Namespace("shop").Name(a.Name).Labels(a.Labels.Map()).Obj()
	obj.UID = a.UID
	if _, err := client.CoreV1().Pods("shop").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Reserve(a, keys, time.Minute, nil)

	done := waitAsync(c, context.Background(), keys, b)
	select {
	case r := <-done:
		t.Fatalf("WaitForPeers returned %+v while cache-0 was in flight", r)
	case <-time.After(100 * time.Millisecond):
	}
	// The scheduler binds cache-0; the informer reports it; the waiter goes on
	// and sees cache-0 as a peer on its node.
	obj.Spec.NodeName = "node-1"
	if _, err := client.CoreV1().Pods("shop").Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if len(r.pending) != 0 {
			t.Errorf("still pending after the binding was seen: %v", r.pending)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitForPeers did not return after the binding was seen")
	}
	if diff := cmp.Diff([]string{"shop/cache-0"}, names(c.Peers(keys, b.UID))); diff != "" {
		t.Errorf("Peers mismatch (-want +got):\n%s", diff)
	}
	if got := c.InFlight(); got != 0 {
		t.Errorf("InFlight() = %d, want 0", got)
	}
}

func TestWaitForPeersEndsWithContext(t *testing.T) {
	c, _ := startCache(t, byInstance, nil)
	a, keys := pending("cache-0", "cache")
	b, _ := pending("cache-1", "cache")
	c.Reserve(a, keys, time.Minute, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	waited, p := c.WaitForPeers(ctx, keys, b.UID)
	if diff := cmp.Diff([]string{"shop/cache-0"}, names(p)); diff != "" {
		t.Errorf("pods still in flight mismatch (-want +got):\n%s", diff)
	}
	if waited < 50*time.Millisecond {
		t.Errorf("waited %v, want at least the context's 50ms", waited)
	}
}

func TestInFlightExpires(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Now())
	log, _ := logtest.NewNullLogger()
	c, err := New(fake.NewClientset(), byInstance, log, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	a, keys := pending("cache-0", "cache")
	b, _ := pending("cache-1", "cache")
	c.Reserve(a, keys, 2*time.Second, nil)

	done := waitAsync(c, context.Background(), keys, b)
	eventually(t, "the waiter to arm its timer", clock.HasWaiters)
	clock.Step(time.Second)
	select {
	case r := <-done:
		t.Fatalf("WaitForPeers returned %+v before the reservation expired", r)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Step(time.Second)
	select {
	case r := <-done:
		if len(r.pending) != 0 || r.waited != 2*time.Second {
			t.Errorf("WaitForPeers = %+v, want no pod pending after 2s", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitForPeers did not return when the reservation expired")
	}
	if got := c.InFlight(); got != 0 {
		t.Errorf("InFlight() = %d, want 0 after expiry", got)
	}
}

func TestAssume(t *testing.T) {
	c, client := startCache(t, byInstance, nil)
	a, keys := pending("cache-0", "cache")
	b, _ := pending("cache-1", "cache")
	c.Reserve(a, keys, time.Minute, testOrigin)
	if got, gotKeys, by, ok := c.Reserved(a.UID); !ok || got != a || !cmp.Equal(keys, gotKeys) || by != testOrigin {
		t.Fatalf("Reserved() = %v, %v, %v, %v; want the reserved pod, keys and policy", got, gotKeys, by, ok)
	}

	// Our bind verb bound it: it counts as placed at once, before any informer
	// event, and is in flight no more.
	placed := *a
	placed.Node = "node-1"
	c.Assume(&placed, keys, nil)
	if _, _, _, ok := c.Reserved(a.UID); ok {
		t.Error("Reserved() still finds the pod after Assume")
	}
	peers := c.Peers(keys, b.UID)
	if len(peers) != 1 || peers[0].Node != "node-1" {
		t.Fatalf("Peers() = %v, want cache-0 on node-1", peers)
	}
	if got, ok := c.PodByUID(a.UID); !ok || got.Node != "node-1" {
		t.Errorf("PodByUID() = %v, %v; want cache-0 on node-1", got, ok)
	}

	// The informer's report replaces the assumed placement; a delete removes it.
	obj := fixture.MakePod().Namespace("shop").Name(a.Name).Labels(a.Labels.Map()).Node("node-1").Obj()
	obj.UID = a.UID
	if _, err := client.CoreV1().Pods("shop").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	if got := c.PodCount(); got != 1 {
		t.Errorf("PodCount() = %d, want 1 (informer report replaces the assumed pod)", got)
	}
	if err := client.CoreV1().Pods("shop").Delete(context.Background(), a.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted pod gone", func() bool { _, ok := c.PodByUID(a.UID); return !ok })
}

func TestDeleteEndsFlight(t *testing.T) {
	for _, feed := range feeds {
		t.Run(feed.name, func(t *testing.T) { testDeleteEndsFlight(t, feed.start) })
	}
}

func testDeleteEndsFlight(t *testing.T, start startFunc) {
	c, client := start(t, byInstance, nil)
	obj := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Obj()
	a := model.PodFromObject(obj)
	keys, _, _ := byInstance(context.Background(), a)
	if _, err := client.CoreV1().Pods("shop").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	c.Reserve(a, keys, time.Minute, nil)
	if err := client.CoreV1().Pods("shop").Delete(context.Background(), "cache-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted pod no longer in flight", func() bool { return c.InFlight() == 0 })
}

// TestReservationsOfPodsNeverBoundAreSwept: a pod that passed filter but was
// never bound (another plugin refused it) does not stay recorded forever.
func TestReservationsOfPodsNeverBoundAreSwept(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Now())
	log, _ := logtest.NewNullLogger()
	c, err := New(fake.NewClientset(), byInstance, log, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	for i := range minSweep - 1 {
		p, keys := pending(fmt.Sprintf("web-%d", i), fmt.Sprintf("inst-%d", i%3))
		if i%2 == 0 {
			keys = nil // ungrouped pods are recorded too, for the bind verb
		}
		c.Reserve(p, keys, time.Second, nil)
	}
	clock.Step(2 * time.Second)
	fresh, keys := pending("cache-0", "cache")
	c.Reserve(fresh, keys, time.Second, nil)
	if got := c.InFlight(); got != 1 {
		t.Errorf("InFlight() = %d after the sweep, want 1 (the fresh reservation)", got)
	}
	if len(c.inflightByKey) != 1 {
		t.Errorf("%d keys indexed after the sweep, want 1", len(c.inflightByKey))
	}
}
