package placement

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

func TestCacheKeyFuncError(t *testing.T) {
	errBad := errors.New("policy exploded")
	keys := func(ctx context.Context, p *model.Pod) ([]string, *model.Claims, error) {
		if labelOf(p, "bad") == "true" {
			return []string{"must-not-be-used"}, roleClaims(testOrigin, "must-not-be-kept"), errBad
		}
		return byInstance(ctx, p)
	}
	logger, hook := logtest.NewNullLogger()
	bad := fixture.RedisLabels("cache", "replica", "")
	bad["bad"] = "true"
	c, _ := startCache(t, keys, logger,
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Labels(bad).Node("node-2").Obj())

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

// The KeyFunc's claims stay with the indexed pod, follow label changes and
// policy changes, and are dropped with the keys when the KeyFunc fails.
func TestCacheKeepsClaims(t *testing.T) {
	ctx := context.Background()
	c, client := startCache(t, byInstance, nil,
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj())
	kept := func() map[string]string {
		got := map[string]string{}
		for _, p := range c.Peers([]string{"shop/cache"}, "") {
			got[p.Name] = claimsView(p.Claims)
		}
		return got
	}
	if diff := cmp.Diff(map[string]string{"cache-0": "test: role=master", "cache-1": "test: role=replica"}, kept()); diff != "" {
		t.Errorf("claims after sync mismatch (-want +got):\n%s", diff)
	}

	// Failover: the replica is relabelled master.
	p, err := client.CoreV1().Pods("shop").Get(ctx, "cache-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels = fixture.RedisLabels("cache", "master", "")
	if _, err := client.CoreV1().Pods("shop").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, c, client)
	if diff := cmp.Diff(map[string]string{"cache-0": "test: role=master", "cache-1": "test: role=master"}, kept()); diff != "" {
		t.Errorf("claims after relabel mismatch (-want +got):\n%s", diff)
	}

	v2 := instanceUnder(&model.Origin{Revision: "v2"})
	if err := c.SetKeyFunc(ctx, func(ctx context.Context, p *model.Pod) ([]string, *model.Claims, error) {
		keys, described, err := v2(ctx, p)
		if p.Name == "cache-1" {
			return keys, described, errors.New("boom")
		}
		return keys, described, err
	}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"cache-0": "v2: role=master"}, kept()); diff != "" {
		t.Errorf("claims after SetKeyFunc mismatch (-want +got):\n%s", diff)
	}
}

// A pod already indexed whose keys now fail is removed from the index.
func TestCacheKeyFuncErrorUnindexes(t *testing.T) {
	c, client := startCache(t, byInstance, nil,
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj())
	if err := c.SetKeyFunc(context.Background(), func(ctx context.Context, p *model.Pod) ([]string, *model.Claims, error) {
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
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj(),
		fixture.MakePod().Namespace("ops").Name("queue-0").Redis("queue", "master", "").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("web-0").Label(nameLabel, "web").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-pending").Redis("cache", "replica", "").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-done").Redis("cache", "replica", "").Node("node-1").Phase(corev1.PodSucceeded).Obj())
	if got, want := c.PodCount(), 3; got != want {
		t.Fatalf("PodCount() before = %d, want %d", got, want)
	}

	var (
		mu    sync.Mutex
		calls []string
	)
	byName := func(_ context.Context, p *model.Pod) ([]string, *model.Claims, error) {
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
