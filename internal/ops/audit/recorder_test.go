package audit

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/regosched/regosched/test/fixture"
)

// TestEventsThroughClientGo records through client-go's events.k8s.io
// recorder, as `regosched serve` would: the references the audit builds
// from cached pods, which keep no full object, must make valid Events.
func TestEventsThroughClientGo(t *testing.T) {
	f := newHarness(t, append(nodes("node-1"),
		fixture.MakePod().Namespace("shop").Name("cache-0").UID("uid-shop-cache-0").Redis("cache", "master", "0").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-2").UID("uid-shop-cache-2").Redis("cache", "master", "1").Node("node-1").Obj(),
	)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: f.client.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer broadcaster.Shutdown()
	f.auditor.recorder = broadcaster.NewRecorder(scheme.Scheme, "regosched")
	f.run(t)

	type seen struct{ Regarding, UID, Related, Type, Reason, Action, Note string }
	var got []seen
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("events = %v, want 2", got)
		}
		list, err := f.client.EventsV1().Events("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range list.Items {
			s := seen{Regarding: e.Regarding.Kind + " " + e.Regarding.Name, UID: string(e.Regarding.UID),
				Type: e.Type, Reason: e.Reason, Action: e.Action, Note: e.Note}
			if e.Related != nil {
				s.Related = e.Related.Kind + " " + e.Related.Name
			}
			got = append(got, s)
		}
	}
	slices.SortFunc(got, func(a, b seen) int { return strings.Compare(a.Regarding, b.Regarding) })
	want := []seen{
		{Regarding: "Pod cache-0", UID: "uid-shop-cache-0", Related: "Pod cache-2", Type: "Warning", Reason: EventReason, Action: EventAction("redis-masters"),
			Note: "hard placement rule redis-masters is broken on node node-1 by this pod and shop/cache-2: redis: master shop/cache-2 of cluster cache already on this node"},
		{Regarding: "Pod cache-2", UID: "uid-shop-cache-2", Related: "Pod cache-0", Type: "Warning", Reason: EventReason, Action: EventAction("redis-masters"),
			Note: "hard placement rule redis-masters is broken on node node-1 by this pod and shop/cache-0: redis: master shop/cache-0 of cluster cache already on this node"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// The same pair breaking another rule (cache-2 now a replica of cache-0's
	// shard) is announced with its own note, not folded into the first
	// series, whose note the recorder would keep.
	p := fixture.MakePod().Namespace("shop").Name("cache-2").UID("uid-shop-cache-2").Redis("cache", "replica", "0").Node("node-1").Obj()
	f.apply(t, p)
	f.run(t)
	const note = "hard placement rule redis-master-replica is broken on node node-1 by this pod and shop/cache-0: redis: master shop/cache-0 of cluster cache (shard 0) already on this node"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		list, err := f.client.EventsV1().Events("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool { return e.Regarding.Name == "cache-2" && e.Note == note }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event with note %q among %d events", note, len(list.Items))
		}
	}
}
