package placement

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

const (
	instanceLabel  = "app.kubernetes.io/instance"
	componentLabel = "app.kubernetes.io/component"
	nameLabel      = "app.kubernetes.io/name"
)

// labelOf is the value of label key on p, "" when p has none.
func labelOf(p *Pod, key string) string {
	v, _ := p.Labels.Get(key)
	return v
}

// byInstance groups pods by their instance label, namespace-qualified; its
// facts are the pod's role.
func byInstance(_ context.Context, p *Pod) ([]string, any, error) {
	inst := labelOf(p, instanceLabel)
	if inst == "" {
		return nil, nil, nil
	}
	return []string{p.Namespace + "/" + inst}, "role=" + labelOf(p, componentLabel), nil
}

// byInstanceAndRole puts a pod in two groups: its instance, and its role
// within that instance.
func byInstanceAndRole(ctx context.Context, p *Pod) ([]string, any, error) {
	keys, facts, _ := byInstance(ctx, p)
	if len(keys) == 0 {
		return nil, nil, nil
	}
	if role := labelOf(p, componentLabel); role != "" {
		keys = append(keys, keys[0]+"/"+role)
	}
	return keys, facts, nil
}

type podOpt func(*corev1.Pod)

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func inPhase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func withPriority(v int32) podOpt { return func(p *corev1.Pod) { p.Spec.Priority = &v } }

// newPod returns a running pod whose UID is "uid-<name>".
func newPod(ns, name string, labels map[string]string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			UID:       types.UID("uid-" + name),
			Labels:    labels,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func redis(instance, component string) map[string]string {
	return map[string]string{nameLabel: "redis", instanceLabel: instance, componentLabel: component}
}

func newNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: labels}}
}

// startCache runs a cache over a fake clientset holding objs, waits for its
// initial sync, and stops it at the end of the test.
func startCache(t testing.TB, keys KeyFunc, log logrus.FieldLogger, objs ...kruntime.Object) (*Cache, *fake.Clientset) {
	t.Helper()
	if log == nil {
		l, _ := logtest.NewNullLogger()
		log = l
	}
	client := fake.NewClientset(objs...)
	c, err := New(client, keys, log)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	t.Cleanup(func() {
		cancel()
		c.Shutdown()
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !c.WaitForSync(syncCtx) {
		t.Fatal("cache did not sync within 30s")
	}
	return c, client
}

// names returns namespace/name of pods, in order.
func names(pods []*Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

var barrierSeq atomic.Int64

// flush makes sure every pod event sent before it has been handled: it
// creates a marker pod, waits until the cache indexed it, deletes it and
// waits until it is gone. The informer handles events in order. It needs a
// key function that groups by instance.
func flush(t *testing.T, c *Cache, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("barrier-%d", barrierSeq.Add(1))
	p := newPod("zz-barrier", name, map[string]string{instanceLabel: name}, onNode("node-barrier"))
	key := []string{"zz-barrier/" + name}
	if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating barrier pod: %v", err)
	}
	eventually(t, "barrier pod indexed", func() bool { return len(c.Peers(key, "")) == 1 })
	if err := client.CoreV1().Pods(p.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting barrier pod: %v", err)
	}
	eventually(t, "barrier pod removed", func() bool { return len(c.Peers(key, "")) == 0 })
}

func TestCacheInitialList(t *testing.T) {
	objs := []kruntime.Object{
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", redis("cache", "replica"), onNode("node-2")),
		newPod("shop", "cache-2", redis("cache", "replica"), onNode("node-3")),
		// The fake clientset ignores the field selector: the cache must drop these.
		newPod("shop", "cache-pending", redis("cache", "replica"), inPhase(corev1.PodPending)),
		newPod("shop", "cache-done", redis("cache", "replica"), onNode("node-1"), inPhase(corev1.PodSucceeded)),
		newPod("shop", "cache-failed", redis("cache", "replica"), onNode("node-1"), inPhase(corev1.PodFailed)),
		// Same instance name, other namespace: another group.
		newPod("ops", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "session-0", redis("session", "master"), onNode("node-1")),
		// No keys: not indexed.
		newPod("shop", "web-0", map[string]string{nameLabel: "web"}, onNode("node-1")),
		newPod("shop", "bare", nil, onNode("node-1")),
	}
	c, _ := startCache(t, byInstance, nil, objs...)

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
	labels := redis("cache", "master")
	c, _ := startCache(t, byInstance, nil,
		newPod("shop", "cache-0", labels, onNode("node-1"), withPriority(1000)),
		newPod("shop", "cache-1", labels, onNode("node-2")))
	want := []*Pod{
		{Namespace: "shop", Name: "cache-0", UID: "uid-cache-0", Labels: NewLabels(labels), Priority: 1000, Node: "node-1", Facts: "role=master"},
		{Namespace: "shop", Name: "cache-1", UID: "uid-cache-1", Labels: NewLabels(labels), Priority: 0, Node: "node-2", Facts: "role=master"},
	}
	if diff := cmp.Diff(want, c.Peers([]string{"shop/cache"}, "")); diff != "" {
		t.Errorf("Peers() mismatch (-want +got):\n%s", diff)
	}
}

func TestCachePodInTwoGroupsReturnedOnce(t *testing.T) {
	c, _ := startCache(t, byInstanceAndRole, nil,
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", redis("cache", "replica"), onNode("node-2")))
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
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", redis("cache", "replica"), onNode("node-2")),
		newPod("shop", "session-0", redis("session", "master"), onNode("node-3")),
		newPod("shop", "cache-2", redis("cache", "replica"), inPhase(corev1.PodPending)),
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
			action: create(newPod("shop", "cache-3", redis("cache", "replica"), onNode("node-3"))),
			want: map[string][]string{
				"shop/cache":         {"shop/cache-0", "shop/cache-1", "shop/cache-3"},
				"shop/cache/replica": {"shop/cache-1", "shop/cache-3"},
			},
			wantCount: 4,
		},
		{
			name:   "pending pod created: not indexed",
			action: create(newPod("shop", "cache-3", redis("cache", "replica"), inPhase(corev1.PodPending))),
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
				p.Labels = redis("cache", "master")
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
				p.Labels = redis("session", "replica")
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := make([]kruntime.Object, len(initial))
			for i, o := range initial {
				objs[i] = o.DeepCopyObject()
			}
			c, client := startCache(t, byInstanceAndRole, nil, objs...)
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

func TestCacheKeyFuncError(t *testing.T) {
	errBad := errors.New("policy exploded")
	keys := func(ctx context.Context, p *Pod) ([]string, any, error) {
		if labelOf(p, "bad") == "true" {
			return []string{"must-not-be-used"}, "must-not-be-kept", errBad
		}
		return byInstance(ctx, p)
	}
	logger, hook := logtest.NewNullLogger()
	bad := redis("cache", "replica")
	bad["bad"] = "true"
	c, _ := startCache(t, keys, logger,
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", bad, onNode("node-2")))

	if diff := cmp.Diff([]string{"shop/cache-0"}, names(c.Peers([]string{"shop/cache"}, ""))); diff != "" {
		t.Errorf("Peers() mismatch (-want +got):\n%s", diff)
	}
	if got := len(c.Peers([]string{"must-not-be-used"}, "")); got != 0 {
		t.Errorf("keys returned with an error were indexed: %d pods", got)
	}
	if got, want := c.PodCount(), 1; got != want {
		t.Errorf("PodCount() = %d, want %d", got, want)
	}

	type logged struct {
		Level   logrus.Level
		Message string
		Pod     any
		Err     any
	}
	var got []logged
	for _, e := range hook.AllEntries() {
		got = append(got, logged{e.Level, e.Message, e.Data["pod"], e.Data[logrus.ErrorKey]})
	}
	want := []logged{{logrus.ErrorLevel, "computing peer keys; pod not indexed", "shop/cache-1", errBad}}
	if diff := cmp.Diff(want, got, cmp.Comparer(errors.Is)); diff != "" {
		t.Errorf("log entries mismatch (-want +got):\n%s", diff)
	}
}

// The KeyFunc's facts stay with the indexed pod, follow label changes and
// policy changes, and are dropped with the keys when the KeyFunc fails.
func TestCacheKeepsFacts(t *testing.T) {
	ctx := context.Background()
	c, client := startCache(t, byInstance, nil,
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", redis("cache", "replica"), onNode("node-2")))
	facts := func() map[string]any {
		got := map[string]any{}
		for _, p := range c.Peers([]string{"shop/cache"}, "") {
			got[p.Name] = p.Facts
		}
		return got
	}
	if diff := cmp.Diff(map[string]any{"cache-0": "role=master", "cache-1": "role=replica"}, facts()); diff != "" {
		t.Errorf("facts after sync mismatch (-want +got):\n%s", diff)
	}

	// Failover: the replica is relabelled master.
	p, err := client.CoreV1().Pods("shop").Get(ctx, "cache-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels = redis("cache", "master")
	if _, err := client.CoreV1().Pods("shop").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	if diff := cmp.Diff(map[string]any{"cache-0": "role=master", "cache-1": "role=master"}, facts()); diff != "" {
		t.Errorf("facts after relabel mismatch (-want +got):\n%s", diff)
	}

	if err := c.SetKeyFunc(ctx, func(ctx context.Context, p *Pod) ([]string, any, error) {
		keys, _, err := byInstance(ctx, p)
		if p.Name == "cache-1" {
			return keys, "v2", errors.New("boom")
		}
		return keys, "v2", err
	}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"cache-0": "v2"}, facts()); diff != "" {
		t.Errorf("facts after SetKeyFunc mismatch (-want +got):\n%s", diff)
	}
}

// A pod already indexed whose keys now fail is removed from the index.
func TestCacheKeyFuncErrorUnindexes(t *testing.T) {
	c, client := startCache(t, byInstance, nil,
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", redis("cache", "replica"), onNode("node-2")))
	if err := c.SetKeyFunc(context.Background(), func(ctx context.Context, p *Pod) ([]string, any, error) {
		if p.Name == "cache-1" {
			return nil, nil, errors.New("boom")
		}
		return byInstance(ctx, p)
	}, nil); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	if diff := cmp.Diff([]string{"shop/cache-0"}, names(c.Peers([]string{"shop/cache"}, ""))); diff != "" {
		t.Errorf("Peers() mismatch (-want +got):\n%s", diff)
	}
}

func TestCacheSetKeyFunc(t *testing.T) {
	c, _ := startCache(t, byInstance, nil,
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", redis("cache", "replica"), onNode("node-2")),
		newPod("ops", "queue-0", redis("queue", "master"), onNode("node-2")),
		newPod("shop", "web-0", map[string]string{nameLabel: "web"}, onNode("node-1")),
		newPod("shop", "cache-pending", redis("cache", "replica")),
		newPod("shop", "cache-done", redis("cache", "replica"), onNode("node-1"), inPhase(corev1.PodSucceeded)))
	if got, want := c.PodCount(), 3; got != want {
		t.Fatalf("PodCount() before = %d, want %d", got, want)
	}

	var (
		mu    sync.Mutex
		calls []string
	)
	byName := func(_ context.Context, p *Pod) ([]string, any, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, p.Namespace+"/"+p.Name)
		if n := labelOf(p, nameLabel); n != "" {
			return []string{"app/" + n}, nil, nil
		}
		return nil, nil, nil
	}
	if err := c.SetKeyFunc(context.Background(), byName, nil); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		key  string
		want []string
	}{
		{"shop/cache", []string{}},
		{"ops/queue", []string{}},
		{"app/redis", []string{"ops/queue-0", "shop/cache-0", "shop/cache-1"}},
		{"app/web", []string{"shop/web-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, names(c.Peers([]string{tt.key}, ""))); diff != "" {
				t.Errorf("Peers(%q) mismatch (-want +got):\n%s", tt.key, diff)
			}
		})
	}
	if got, want := c.PodCount(), 4; got != want {
		t.Errorf("PodCount() after = %d, want %d", got, want)
	}
	// Pending and finished pods are in the informer store, but the key
	// function is not asked about them.
	mu.Lock()
	defer mu.Unlock()
	for _, name := range calls {
		if name == "shop/cache-pending" || name == "shop/cache-done" {
			t.Errorf("key function called for %s, which is not bound or is finished", name)
		}
	}
}

func TestCacheNodes(t *testing.T) {
	c, client := startCache(t, byInstance, nil,
		newNode("node-1", map[string]string{"topology.kubernetes.io/zone": "a", "kubernetes.io/hostname": "node-1"}),
		newNode("node-2", nil))

	tests := []struct {
		node       string
		wantLabels map[string]string
		wantOK     bool
	}{
		{"node-1", map[string]string{"topology.kubernetes.io/zone": "a", "kubernetes.io/hostname": "node-1"}, true},
		{"node-2", nil, true},
		{"node-3", nil, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			labels, ok := c.NodeLabels(tt.node)
			if ok != tt.wantOK {
				t.Errorf("NodeLabels(%q) known = %v, want %v", tt.node, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.wantLabels, labels); diff != "" {
				t.Errorf("NodeLabels(%q) mismatch (-want +got):\n%s", tt.node, diff)
			}
		})
	}
	if got, want := c.NodeCount(), 2; got != want {
		t.Errorf("NodeCount() = %d, want %d", got, want)
	}

	ctx := context.Background()
	if _, err := client.CoreV1().Nodes().Create(ctx, newNode("node-3", map[string]string{"topology.kubernetes.io/zone": "b"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-3 known", func() bool { _, ok := c.NodeLabels("node-3"); return ok })
	if got, want := c.NodeCount(), 3; got != want {
		t.Errorf("NodeCount() after create = %d, want %d", got, want)
	}
	labels, _ := c.NodeLabels("node-3")
	if diff := cmp.Diff(map[string]string{"topology.kubernetes.io/zone": "b"}, labels); diff != "" {
		t.Errorf("NodeLabels(node-3) mismatch (-want +got):\n%s", diff)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-1 forgotten", func() bool { _, ok := c.NodeLabels("node-1"); return !ok })
	if got, want := c.NodeCount(), 2; got != want {
		t.Errorf("NodeCount() after delete = %d, want %d", got, want)
	}
}

func TestRegisterMetrics(t *testing.T) {
	c, _ := startCache(t, byInstance, nil,
		newPod("shop", "cache-0", redis("cache", "master"), onNode("node-1")),
		newPod("shop", "cache-1", redis("cache", "replica"), onNode("node-2")),
		newPod("shop", "cache-pending", redis("cache", "replica")),
		newPod("shop", "web-0", nil, onNode("node-1")),
		newNode("node-1", nil), newNode("node-2", nil), newNode("node-3", nil))
	reg := prometheus.NewPedanticRegistry()
	if err := c.RegisterMetrics(reg); err != nil {
		t.Fatalf("RegisterMetrics() error = %v", err)
	}
	want := `
# HELP regosched_cached_nodes Nodes known to the placement cache.
# TYPE regosched_cached_nodes gauge
regosched_cached_nodes 3
# HELP regosched_cached_pods Bound pods that belong to a policy group and are indexed for peer look-ups.
# TYPE regosched_cached_pods gauge
regosched_cached_pods 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "regosched_cached_pods", "regosched_cached_nodes"); err != nil {
		t.Error(err)
	}
	if err := c.RegisterMetrics(reg); err == nil {
		t.Error("RegisterMetrics() twice on one registry: no error")
	}
}

func TestPodFromObject(t *testing.T) {
	labels := map[string]string{"a": "b"}
	tests := []struct {
		name string
		in   *corev1.Pod
		want *Pod
	}{
		{
			name: "bound with priority",
			in:   newPod("shop", "p", labels, onNode("n1"), withPriority(-5)),
			want: &Pod{Namespace: "shop", Name: "p", UID: "uid-p", Labels: NewLabels(labels), Priority: -5, Node: "n1"},
		},
		{
			name: "pending, nil priority and labels",
			in:   newPod("shop", "p", nil, inPhase(corev1.PodPending)),
			want: &Pod{Namespace: "shop", Name: "p", UID: "uid-p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, PodFromObject(tt.in)); diff != "" {
				t.Errorf("PodFromObject() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStripPod(t *testing.T) {
	prio := int32(100)
	labels := redis("cache", "master")
	full := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "cache-0",
			Namespace:       "shop",
			UID:             "uid-cache-0",
			ResourceVersion: "42",
			Generation:      3,
			Labels:          labels,
			Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "cache", UID: "uid-sts"}},
			Finalizers:      []string{"example.com/finalizer"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			NodeName:          "node-1",
			Priority:          &prio,
			PriorityClassName: "high",
			SchedulerName:     "regosched",
			Containers:        []corev1.Container{{Name: "redis", Image: "redis:8", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Volumes:           []corev1.Volume{{Name: "data"}},
			Tolerations:       []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			NodeSelector:      map[string]string{"disk": "ssd"},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			PodIP:             "10.0.0.1",
			HostIP:            "192.168.0.1",
			ContainerStatuses: []corev1.ContainerStatus{{Name: "redis", Ready: true}},
		},
	}
	want := &podRecord{
		namespace:       "shop",
		name:            "cache-0",
		uid:             "uid-cache-0",
		resourceVersion: "42",
		labels:          NewLabels(labels),
		nodeName:        "node-1",
		priority:        prio,
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "shop/cache-0", Obj: full}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"full pod", full, want},
		{"pending pod, no priority", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, &podRecord{namespace: "ns", name: "p"}},
		{"failed pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
			&podRecord{namespace: "ns", name: "p", terminal: true}},
		{"tombstone unchanged", tombstone, tombstone},
		{"node unchanged", newNode("n", nil), newNode("n", nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stripPod(tt.in)
			if err != nil {
				t.Fatalf("stripPod() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(podRecord{})); diff != "" {
				t.Errorf("stripPod() mismatch (-want +got):\n%s", diff)
			}
			if r, ok := got.(*podRecord); ok {
				if diff := cmp.Diff(r, r.DeepCopyObject(), cmp.AllowUnexported(podRecord{})); diff != "" {
					t.Errorf("DeepCopyObject() mismatch (-want +got):\n%s", diff)
				}
				m, err := meta.Accessor(r)
				if err != nil {
					t.Fatalf("meta.Accessor() error = %v", err)
				}
				if got, want := [4]string{m.GetNamespace(), m.GetName(), string(m.GetUID()), m.GetResourceVersion()},
					[4]string{r.namespace, r.name, string(r.uid), r.resourceVersion}; got != want {
					t.Errorf("meta.Accessor() = %q, want %q", got, want)
				}
			}
		})
	}
}

func TestStripNode(t *testing.T) {
	labels := map[string]string{"topology.kubernetes.io/zone": "a"}
	full := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "node-1",
			UID:             "uid-node-1",
			ResourceVersion: "7",
			Labels:          labels,
			Annotations:     map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:     []corev1.ContainerImage{{Names: []string{"redis:8"}, SizeBytes: 1 << 20}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}},
		},
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-node-1", ResourceVersion: "7", Labels: labels}}
	tombstone := cache.DeletedFinalStateUnknown{Key: "node-1", Obj: full}
	pod := newPod("ns", "p", nil)
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"full node", full, want},
		{"tombstone unchanged", tombstone, tombstone},
		{"pod unchanged", pod, pod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stripNode(tt.in)
			if err != nil {
				t.Fatalf("stripNode() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("stripNode() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// newIdleCache is a cache that is never started: benchmarks feed it through
// its event handlers directly, which is faster than the fake informer.
func newIdleCache(tb testing.TB, keys KeyFunc) *Cache {
	tb.Helper()
	l, _ := logtest.NewNullLogger()
	c, err := New(fake.NewClientset(), keys, l)
	if err != nil {
		tb.Fatalf("New() error = %v", err)
	}
	return c
}

// benchPod is a bound pod as the API server sends it, before stripping: six
// labels plus the usual bulk.
func benchPod(i int, ns, instance string) *corev1.Pod {
	prio := int32(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("%s-%d", instance, i),
			Namespace:       ns,
			UID:             types.UID(fmt.Sprintf("0b5e1e5a-0000-4000-8000-%012d", i)),
			ResourceVersion: fmt.Sprintf("%d", 100000+i),
			Labels: map[string]string{
				nameLabel:                            "redis",
				instanceLabel:                        instance,
				componentLabel:                       "replica",
				"app.kubernetes.io/managed-by":       "helm",
				"controller-revision-hash":           fmt.Sprintf("%s-5d8f7c9b4", instance),
				"statefulset.kubernetes.io/pod-name": fmt.Sprintf("%s-%d", instance, i),
			},
			Annotations: map[string]string{"checksum/config": strings.Repeat("f", 64)},
		},
		Spec: corev1.PodSpec{
			NodeName:   fmt.Sprintf("node-%d", i%500),
			Priority:   &prio,
			Containers: []corev1.Container{{Name: "redis", Image: "redis:8", Args: []string{"--appendonly", "yes"}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
}

// fill stores and indexes n stripped pods as the informer would, with groups
// of six.
func fill(tb testing.TB, c *Cache, n int) {
	tb.Helper()
	store := c.pods.GetStore()
	for i := range n {
		obj, _ := stripPod(benchPod(i, fmt.Sprintf("ns-%d", i/6%50), fmt.Sprintf("inst-%d", i/6)))
		if err := store.Add(obj); err != nil {
			tb.Fatal(err)
		}
		c.writer().add(obj)
	}
}

// BenchmarkCacheMemory reports the heap kept per cached pod (informer store
// plus peer index) for 20,000 stripped pods with six labels each.
func BenchmarkCacheMemory(b *testing.B) {
	const n = 20000
	var total float64
	for range b.N {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := newIdleCache(b, byInstance)
		b.StartTimer()
		fill(b, c, n)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.PodCount() != n {
			b.Fatalf("PodCount() = %d, want %d", c.PodCount(), n)
		}
		runtime.KeepAlive(c)
		total += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		b.StartTimer()
	}
	b.ReportMetric(total/float64(b.N)/n, "bytes/pod")
}

// BenchmarkPeers shows that finding six peers costs the same with 1,000 or
// 100,000 unrelated pods in the cache.
func BenchmarkPeers(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			c := newIdleCache(b, byInstance)
			for i := range n {
				obj, _ := stripPod(benchPod(i, fmt.Sprintf("ns-%d", i/6%50), fmt.Sprintf("other-%d", i/6)))
				c.writer().add(obj)
			}
			for i := range 6 {
				obj, _ := stripPod(benchPod(i, "shop", "target"))
				c.writer().add(obj)
			}
			keys := []string{"shop/target"}
			if got := len(c.Peers(keys, "")); got != 6 {
				b.Fatalf("Peers() = %d pods, want 6", got)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if len(c.Peers(keys, "")) != 6 {
					b.Fatal("wrong peer count")
				}
			}
		})
	}
}

// BenchmarkNodeLabels is the per-candidate look-up prioritize makes for
// topology penalties, over 5,000 known nodes.
func BenchmarkNodeLabels(b *testing.B) {
	const n = 5000
	objs := make([]kruntime.Object, n)
	names := make([]string, n)
	for i := range objs {
		names[i] = fmt.Sprintf("node-%05d", i)
		objs[i] = newNode(names[i], map[string]string{"topology.kubernetes.io/zone": fmt.Sprint(i % 3)})
	}
	c, _ := startCache(b, byInstance, nil, objs...)
	b.ReportAllocs()
	for b.Loop() {
		for _, name := range names {
			if _, ok := c.NodeLabels(name); !ok {
				b.Fatalf("node %s unknown", name)
			}
		}
	}
}
