package placement

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

func TestCacheInitialList(t *testing.T) {
	objs := []kruntime.Object{
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-2").Redis("cache", "replica", "").Node("node-3").Obj(),
		// The fake clientset ignores the field selector: the cache must drop these.
		fixture.MakePod().Namespace("shop").Name("cache-pending").Redis("cache", "replica", "").Phase(corev1.PodPending).Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-done").Redis("cache", "replica", "").Node("node-1").Phase(corev1.PodSucceeded).Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-failed").Redis("cache", "replica", "").Node("node-1").Phase(corev1.PodFailed).Obj(),
		// Same instance name, other namespace: another group.
		fixture.MakePod().Namespace("ops").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("session-0").Redis("session", "master", "").Node("node-1").Obj(),
		// No keys: not indexed.
		fixture.MakePod().Namespace("shop").Name("web-0").Label(nameLabel, "web").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("bare").Node("node-1").Obj(),
	}
	for _, feed := range feeds {
		t.Run(feed.name, func(t *testing.T) {
			testCacheInitialList(t, feed.start, objs)
		})
	}
}

func testCacheInitialList(t *testing.T, start startFunc, objs []kruntime.Object) {
	c, _ := start(t, byInstance, nil, copies(objs)...)

	if got, want := c.PodCount(), 5; got != want {
		t.Errorf("PodCount() = %d, want %d", got, want)
	}
	tests := []struct {
		name string
		keys []string
		self types.UID
		want []string
	}{
		{
			name: "all of a group, sorted",
			keys: []string{"shop/cache"},
			want: []string{"shop/cache-0", "shop/cache-1", "shop/cache-2"},
		},
		{
			name: "self excluded by UID",
			keys: []string{"shop/cache"},
			self: "uid-cache-1",
			want: []string{"shop/cache-0", "shop/cache-2"},
		},
		{
			name: "pending pod not in the cache: all peers",
			keys: []string{"shop/cache"},
			self: "uid-cache-pending",
			want: []string{"shop/cache-0", "shop/cache-1", "shop/cache-2"},
		},
		{
			name: "other namespace is another group",
			keys: []string{"ops/cache"},
			want: []string{"ops/cache-0"},
		},
		{
			name: "several groups, sorted by namespace then name",
			keys: []string{"shop/session", "ops/cache"},
			want: []string{"ops/cache-0", "shop/session-0"},
		},
		{
			name: "unknown group",
			keys: []string{"shop/web"},
			want: []string{},
		},
		{
			name: "no keys",
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(c.Peers(tt.keys, tt.self))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Peers(%q, %q) mismatch (-want +got):\n%s", tt.keys, tt.self, diff)
			}
		})
	}
}

func TestCachePodView(t *testing.T) {
	labels := fixture.RedisLabels("cache", "master", "")
	c, _ := startCache(t, byInstance, nil,
		fixture.MakePod().Namespace("shop").Name("cache-0").Labels(labels).Node("node-1").Priority(1000).Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Labels(labels).Node("node-2").Obj())
	want := []*model.Pod{
		{Namespace: "shop", Name: "cache-0", UID: "uid-cache-0", Labels: model.NewLabels(labels), Priority: 1000, Node: "node-1", Claims: roleClaims(testOrigin, "master")},
		{Namespace: "shop", Name: "cache-1", UID: "uid-cache-1", Labels: model.NewLabels(labels), Priority: 0, Node: "node-2", Claims: roleClaims(testOrigin, "master")},
	}
	if diff := cmp.Diff(want, c.Peers([]string{"shop/cache"}, ""), sameClaims); diff != "" {
		t.Errorf("Peers() mismatch (-want +got):\n%s", diff)
	}
}

func TestCachePodInTwoGroupsReturnedOnce(t *testing.T) {
	c, _ := startCache(t, byInstanceAndRole, nil,
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj())
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{"instance then role", []string{"shop/cache", "shop/cache/master"}, []string{"shop/cache-0", "shop/cache-1"}},
		{"role then instance", []string{"shop/cache/replica", "shop/cache"}, []string{"shop/cache-0", "shop/cache-1"}},
		{"same key twice", []string{"shop/cache/master", "shop/cache/master"}, []string{"shop/cache-0"}},
		{"role only", []string{"shop/cache/replica"}, []string{"shop/cache-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, names(c.Peers(tt.keys, ""))); diff != "" {
				t.Errorf("Peers(%q) mismatch (-want +got):\n%s", tt.keys, diff)
			}
		})
	}
	if got, want := c.PodCount(), 2; got != want {
		t.Errorf("PodCount() = %d, want %d (a pod in two groups counts once)", got, want)
	}
}

// TestCacheEvents drives pod changes through the API and checks the index
// follows them.
func TestCacheEvents(t *testing.T) {
	ctx := context.Background()
	update := func(ns, name string, f func(*corev1.Pod)) func(*testing.T, kubernetes.Interface) {
		return func(t *testing.T, client kubernetes.Interface) {
			t.Helper()
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("getting pod: %v", err)
			}
			f(p)
			if _, err := client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("updating pod: %v", err)
			}
		}
	}
	updateStatus := func(ns, name string, f func(*corev1.Pod)) func(*testing.T, kubernetes.Interface) {
		return func(t *testing.T, client kubernetes.Interface) {
			t.Helper()
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("getting pod: %v", err)
			}
			f(p)
			if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("updating pod status: %v", err)
			}
		}
	}
	create := func(p *corev1.Pod) func(*testing.T, kubernetes.Interface) {
		return func(t *testing.T, client kubernetes.Interface) {
			t.Helper()
			if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating pod: %v", err)
			}
		}
	}

	initial := []kruntime.Object{
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("session-0").Redis("session", "master", "").Node("node-3").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-2").Redis("cache", "replica", "").Phase(corev1.PodPending).Obj(),
	}
	tests := []struct {
		name   string
		action func(*testing.T, kubernetes.Interface)
		// want is the peers of every key in the final state.
		want      map[string][]string
		wantCount int
	}{
		{
			name:   "bound pod created",
			action: create(fixture.MakePod().Namespace("shop").Name("cache-3").Redis("cache", "replica", "").Node("node-3").Obj()),
			want: map[string][]string{
				"shop/cache":         {"shop/cache-0", "shop/cache-1", "shop/cache-3"},
				"shop/cache/replica": {"shop/cache-1", "shop/cache-3"},
			},
			wantCount: 4,
		},
		{
			name:   "pending pod created: not indexed",
			action: create(fixture.MakePod().Namespace("shop").Name("cache-3").Redis("cache", "replica", "").Phase(corev1.PodPending).Obj()),
			want: map[string][]string{
				"shop/cache":         {"shop/cache-0", "shop/cache-1"},
				"shop/cache/replica": {"shop/cache-1"},
			},
			wantCount: 3,
		},
		{
			name:   "pending pod bound: indexed",
			action: update("shop", "cache-2", func(p *corev1.Pod) { p.Spec.NodeName = "node-3" }),
			want: map[string][]string{
				"shop/cache":         {"shop/cache-0", "shop/cache-1", "shop/cache-2"},
				"shop/cache/replica": {"shop/cache-1", "shop/cache-2"},
			},
			wantCount: 4,
		},
		{
			name: "failover: replica relabelled master",
			action: update("shop", "cache-1", func(p *corev1.Pod) {
				p.Labels = fixture.RedisLabels("cache", "master", "")
			}),
			want: map[string][]string{
				"shop/cache":         {"shop/cache-0", "shop/cache-1"},
				"shop/cache/master":  {"shop/cache-0", "shop/cache-1"},
				"shop/cache/replica": {},
			},
			wantCount: 3,
		},
		{
			name: "pod moved to another group",
			action: update("shop", "cache-1", func(p *corev1.Pod) {
				p.Labels = fixture.RedisLabels("session", "replica", "")
			}),
			want: map[string][]string{
				"shop/cache":           {"shop/cache-0"},
				"shop/cache/replica":   {},
				"shop/session":         {"shop/cache-1", "shop/session-0"},
				"shop/session/replica": {"shop/cache-1"},
			},
			wantCount: 3,
		},
		{
			name:   "labels removed: no keys, not counted",
			action: update("shop", "cache-1", func(p *corev1.Pod) { p.Labels = nil }),
			want: map[string][]string{
				"shop/cache":         {"shop/cache-0"},
				"shop/cache/replica": {},
			},
			wantCount: 2,
		},
		{
			name:   "pod succeeded: gone",
			action: updateStatus("shop", "cache-1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			want: map[string][]string{
				"shop/cache":         {"shop/cache-0"},
				"shop/cache/replica": {},
			},
			wantCount: 2,
		},
		{
			name:   "pod failed: gone",
			action: updateStatus("shop", "cache-0", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			want: map[string][]string{
				"shop/cache":        {"shop/cache-1"},
				"shop/cache/master": {},
			},
			wantCount: 2,
		},
		{
			name: "status churn: kept",
			action: updateStatus("shop", "cache-1", func(p *corev1.Pod) {
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			}),
			want: map[string][]string{
				"shop/cache":         {"shop/cache-0", "shop/cache-1"},
				"shop/cache/replica": {"shop/cache-1"},
			},
			wantCount: 3,
		},
		{
			name: "pod deleted: gone",
			action: func(t *testing.T, client kubernetes.Interface) {
				if err := client.CoreV1().Pods("shop").Delete(ctx, "cache-0", metav1.DeleteOptions{}); err != nil {
					t.Fatalf("deleting pod: %v", err)
				}
			},
			want: map[string][]string{
				"shop/cache":        {"shop/cache-1"},
				"shop/cache/master": {},
			},
			wantCount: 2,
		},
		{
			name: "pending pod deleted: nothing changes",
			action: func(t *testing.T, client kubernetes.Interface) {
				if err := client.CoreV1().Pods("shop").Delete(ctx, "cache-2", metav1.DeleteOptions{}); err != nil {
					t.Fatalf("deleting pod: %v", err)
				}
			},
			want: map[string][]string{
				"shop/cache": {"shop/cache-0", "shop/cache-1"},
			},
			wantCount: 3,
		},
	}
	for _, feed := range feeds {
		for _, tt := range tests {
			t.Run(feed.name+"/"+tt.name, func(t *testing.T) {
				c, client := feed.start(t, byInstanceAndRole, nil, copies(initial)...)
				tt.action(t, client)
				flush(t, c, client)
				for key, want := range tt.want {
					if diff := cmp.Diff(want, names(c.Peers([]string{key}, ""))); diff != "" {
						t.Errorf("Peers(%q) mismatch (-want +got):\n%s", key, diff)
					}
				}
				if got := c.PodCount(); got != tt.wantCount {
					t.Errorf("PodCount() = %d, want %d", got, tt.wantCount)
				}
			})
		}
	}
}
