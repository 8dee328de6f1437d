package placement

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// podEvent is one event of a pod informer: an add (new only), an update,
// or a delete (old only), seen as a tombstone when unknown.
type podEvent struct {
	old, new *corev1.Pod
	unknown  bool
}

func (e podEvent) deliver(h cache.ResourceEventHandler) {
	switch {
	case e.old == nil:
		h.OnAdd(e.new, false)
	case e.new == nil && e.unknown:
		h.OnDelete(cache.DeletedFinalStateUnknown{Key: model.PodKey(e.old.Namespace, e.old.Name), Obj: e.old})
	case e.new == nil:
		h.OnDelete(e.old)
	default:
		h.OnUpdate(e.old, e.new)
	}
}

func (e podEvent) pods() []*corev1.Pod {
	return slices.DeleteFunc([]*corev1.Pod{e.old, e.new}, func(p *corev1.Pod) bool { return p == nil })
}

// TestSharedPodEvents hands a cache fed by shared informers the events of
// kube-scheduler's pod informer (every pod, full objects, pending ones too)
// and checks what it indexes and what lands, and that it modifies none of
// the objects, which the scheduler shares.
func TestSharedPodEvents(t *testing.T) {
	master := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj()
	pendingPod := fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Phase(corev1.PodPending).Obj()
	bound := fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj()
	succeeded := fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Phase(corev1.PodSucceeded).Obj()
	failed := fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Phase(corev1.PodFailed).Obj()
	add := func(p *corev1.Pod) podEvent { return podEvent{new: p} }
	update := func(old, p *corev1.Pod) podEvent { return podEvent{old: old, new: p} }
	del := func(p *corev1.Pod) podEvent { return podEvent{old: p} }

	tests := []struct {
		name   string
		events []podEvent
		// want is the peers of shop/cache; cache-1 is in flight from the
		// start, wantInFlight tells whether it still is.
		want         []string
		wantInFlight int
	}{
		{
			name:         "pending pod: not indexed",
			events:       []podEvent{add(pendingPod)},
			want:         []string{"shop/cache-0"},
			wantInFlight: 1,
		},
		{
			name:         "pending pod bound: indexed, landed",
			events:       []podEvent{add(pendingPod), update(pendingPod, bound)},
			want:         []string{"shop/cache-0", "shop/cache-1"},
			wantInFlight: 0,
		},
		{
			name:         "bound pod: indexed",
			events:       []podEvent{add(bound)},
			want:         []string{"shop/cache-0", "shop/cache-1"},
			wantInFlight: 0,
		},
		{
			name:   "bound pod succeeded: gone",
			events: []podEvent{add(bound), update(bound, succeeded)},
			want:   []string{"shop/cache-0"},
		},
		{
			name:   "bound pod failed: gone",
			events: []podEvent{add(bound), update(bound, failed)},
			want:   []string{"shop/cache-0"},
		},
		{
			name:         "finished pod: not indexed",
			events:       []podEvent{add(succeeded)},
			want:         []string{"shop/cache-0"},
			wantInFlight: 1,
		},
		{
			name:   "bound pod deleted: gone",
			events: []podEvent{add(bound), del(bound)},
			want:   []string{"shop/cache-0"},
		},
		{
			name:   "bound pod deleted, final state unknown: gone",
			events: []podEvent{add(bound), {old: bound, unknown: true}},
			want:   []string{"shop/cache-0"},
		},
		{
			name:         "pending pod deleted: no longer in flight",
			events:       []podEvent{add(pendingPod), del(pendingPod)},
			want:         []string{"shop/cache-0"},
			wantInFlight: 0,
		},
		{
			name:         "finished pod deleted",
			events:       []podEvent{add(bound), update(bound, succeeded), del(succeeded)},
			want:         []string{"shop/cache-0"},
			wantInFlight: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newShared(t, fake.NewClientset(), byInstance, nil)
			h := c.selectingWriter()
			events := append([]podEvent{add(master)}, tt.events...)
			var seen, before []*corev1.Pod
			for _, e := range events {
				for _, p := range e.pods() {
					seen = append(seen, p)
					before = append(before, p.DeepCopy())
				}
			}
			inFlight, keys := pending("cache-1", "cache")
			c.Reserve(inFlight, keys, time.Hour, nil)

			for _, e := range events {
				e.deliver(h)
			}

			if diff := cmp.Diff(tt.want, names(c.Peers(keys, ""))); diff != "" {
				t.Errorf("Peers(%q) mismatch (-want +got):\n%s", keys, diff)
			}
			if got := c.InFlight(); got != tt.wantInFlight {
				t.Errorf("InFlight() = %d, want %d", got, tt.wantInFlight)
			}
			if diff := cmp.Diff(before, seen); diff != "" {
				t.Errorf("the cache modified the informer's pods (-before +after):\n%s", diff)
			}
		})
	}
}

// listsAndWatches is what client was asked to list or watch, sorted.
func listsAndWatches(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if v := a.GetVerb(); v == "list" || v == "watch" {
			out = append(out, v+" "+a.GetResource().Resource)
		}
	}
	slices.Sort(out)
	return out
}

// TestNewFromInformersListsAndWatchesNothing: a cache fed by the
// scheduler's informer factory makes no request of its own, whether the
// factory starts before or after it, and is complete once synced.
func TestNewFromInformersListsAndWatchesNothing(t *testing.T) {
	objs := []kruntime.Object{
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-2").Redis("cache", "replica", "").Obj(),
		fixture.MakeNode().Name("node-1").Zone("a").Obj(),
		fixture.MakeNode().Name("node-2").Zone("b").Obj(),
	}
	// The factory's one list and one watch of each.
	want := []string{"list nodes", "list pods", "watch nodes", "watch pods"}
	tests := []struct {
		name string
		// factoryFirst: the factory has started and synced before the
		// cache is built (a plugin built late); else it starts after the
		// cache's Start.
		factoryFirst bool
	}{
		{name: "factory started after the cache"},
		{name: "factory started before the cache", factoryFirst: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(copies(objs)...)
			factory := informers.NewSharedInformerFactory(client, 0)
			pods, nodes := factory.Core().V1().Pods().Informer(), factory.Core().V1().Nodes().Informer()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t.Cleanup(func() {
				cancel()
				factory.Shutdown()
			})
			if tt.factoryFirst {
				factory.Start(ctx.Done())
				factory.WaitForCacheSync(ctx.Done())
			}

			c, err := NewFromInformers(pods, nodes, byInstance, quiet(nil))
			if err != nil {
				t.Fatalf("NewFromInformers() error = %v", err)
			}
			c.Start(ctx)
			if !tt.factoryFirst {
				// Give a list or watch that Start would have begun the time to show.
				time.Sleep(100 * time.Millisecond)
				if got := listsAndWatches(client); len(got) != 0 {
					t.Errorf("Start() listed or watched %q, want nothing", got)
				}
				if c.HasSynced() {
					t.Error("HasSynced() = true before the factory started")
				}
				factory.Start(ctx.Done())
			}
			if !c.WaitForSync(ctx) {
				t.Fatal("cache did not sync")
			}

			if diff := cmp.Diff([]string{"shop/cache-0", "shop/cache-1"}, names(c.Peers([]string{"shop/cache"}, ""))); diff != "" {
				t.Errorf("Peers() after sync mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"node-1", "node-2"}, c.NodeNames()); diff != "" {
				t.Errorf("NodeNames() after sync mismatch (-want +got):\n%s", diff)
			}
			eventually(t, "the factory's watches", func() bool { return len(listsAndWatches(client)) >= len(want) })
			c.Shutdown()
			if diff := cmp.Diff(want, listsAndWatches(client)); diff != "" {
				t.Errorf("lists and watches mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSharedStoreLeftAlone: what reads the shared informers' stores
// (a re-index, an Assume, node labels) modifies none of their objects.
func TestSharedStoreLeftAlone(t *testing.T) {
	c, _ := startShared(t, byInstance, nil,
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-2").Redis("cache", "replica", "").Obj(),
		fixture.MakeNode().Name("node-1").Zone("a").Obj(),
		fixture.MakeNode().Name("node-2").Obj())
	objects := func() []any { return append(c.pods.GetStore().List(), c.nodes.GetStore().List()...) }
	byKey := func(a, b any) int {
		ka, _ := cache.MetaNamespaceKeyFunc(a)
		kb, _ := cache.MetaNamespaceKeyFunc(b)
		return strings.Compare(ka, kb)
	}
	seen := objects()
	slices.SortFunc(seen, byKey)
	before := make([]any, len(seen))
	for i, o := range seen {
		before[i] = o.(kruntime.Object).DeepCopyObject()
	}

	if err := c.SetKeyFunc(context.Background(), byInstanceAndRole, nil); err != nil {
		t.Fatalf("SetKeyFunc() error = %v", err)
	}
	c.Assume(fixture.MakePod().Namespace("shop").Name("cache-2").Redis("cache", "replica", "").Node("node-1").Model(), []string{"shop/cache"}, nil)
	for _, n := range c.NodeNames() {
		c.NodeLabels(n)
	}

	if diff := cmp.Diff(before, seen); diff != "" {
		t.Errorf("the cache modified the informers' objects (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"shop/cache-0", "shop/cache-1", "shop/cache-2"}, names(c.Peers([]string{"shop/cache"}, ""))); diff != "" {
		t.Errorf("Peers() after re-index and Assume mismatch (-want +got):\n%s", diff)
	}
}

func TestNewFromInformersNeedsBoth(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	pods, nodes := factory.Core().V1().Pods().Informer(), factory.Core().V1().Nodes().Informer()
	tests := []struct {
		name        string
		pods, nodes cache.SharedIndexInformer
	}{
		{"no pod informer", nil, nodes},
		{"no node informer", pods, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewFromInformers(tt.pods, tt.nodes, byInstance, quiet(nil)); err == nil {
				t.Error("NewFromInformers() error = nil, want one")
			}
		})
	}
}
