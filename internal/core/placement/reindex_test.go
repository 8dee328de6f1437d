package placement

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// TestSetKeyFuncBuildsBesideTheOldIndex: while a slow re-index runs, peers
// are read from the old grouping alone (never a mix), binds and informer
// events are not held up by it, and what they wrote meanwhile is in the new
// index when it takes effect, together with whatever activate stores.
func TestSetKeyFuncBuildsBesideTheOldIndex(t *testing.T) {
	c, client := startCache(t, byInstance, nil,
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-2").Redis("cache", "replica", "").Node("node-3").Obj())

	// The new grouping, by role, takes a while per pod once the build has
	// started.
	started := make(chan struct{})
	var calls atomic.Int32
	byRole := func(_ context.Context, p *model.Pod) ([]string, *model.Claims, error) { //nolint:unparam // a KeyFunc
		if calls.Add(1) == 1 {
			close(started)
		}
		time.Sleep(300 * time.Millisecond)
		role := labelOf(p, componentLabel)
		return []string{p.Namespace + "/role=" + role}, roleClaims(testOrigin, role), nil
	}
	var activated atomic.Bool
	done := make(chan error, 1)
	go func() { done <- c.SetKeyFunc(context.Background(), byRole, func() { activated.Store(true) }) }()
	<-started

	// Meanwhile: the old grouping still answers, whole.
	if diff := cmp.Diff([]string{"shop/cache-0", "shop/cache-1", "shop/cache-2"}, names(c.Peers([]string{"shop/cache"}, ""))); diff != "" {
		t.Errorf("Peers() under the old grouping during the re-index (-want +got):\n%s", diff)
	}
	// A bind is recorded at once, not after the whole build.
	start := time.Now()
	c.Assume(fixture.MakePod().Namespace("shop").Name("cache-3").Redis("cache", "master", "").Node("node-4").Model(),
		[]string{"shop/cache"}, nil)
	if waited := time.Since(start); waited > 200*time.Millisecond {
		t.Errorf("Assume waited %v for the re-index", waited)
	}
	// An informer event meanwhile: cache-2 is deleted.
	if err := client.CoreV1().Pods("shop").Delete(context.Background(), "cache-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if activated.Load() {
		t.Fatal("activate ran before the build ended")
	}

	if err := <-done; err != nil {
		t.Fatalf("SetKeyFunc() = %v", err)
	}
	if !activated.Load() {
		t.Error("activate did not run")
	}
	tests := []struct {
		key  string
		want []string
	}{
		{"shop/role=master", []string{"shop/cache-0", "shop/cache-3"}},
		{"shop/role=replica", []string{"shop/cache-1"}},
		{"shop/cache", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, names(c.Peers([]string{tt.key}, ""))); diff != "" {
				t.Errorf("Peers(%s) after the re-index (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}

// TestSetKeyFuncStopsWithItsContext: a re-index cut short changes nothing.
func TestSetKeyFuncStopsWithItsContext(t *testing.T) {
	c, _ := startCache(t, byInstance, nil,
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Node("node-2").Obj())
	ctx, cancel := context.WithCancel(context.Background())
	slow := func(ctx context.Context, p *model.Pod) ([]string, *model.Claims, error) {
		cancel()
		return []string{"other"}, nil, nil
	}
	activated := false
	if err := c.SetKeyFunc(ctx, slow, func() { activated = true }); err == nil {
		t.Error("SetKeyFunc() = nil after its context ended, want an error")
	}
	if activated {
		t.Error("activate ran for a re-index cut short")
	}
	if diff := cmp.Diff([]string{"shop/cache-0", "shop/cache-1"}, names(c.Peers([]string{"shop/cache"}, ""))); diff != "" {
		t.Errorf("Peers() after a cancelled re-index (-want +got):\n%s", diff)
	}
}

// TestUnassumeAfterReindex: an assumed pod re-described by a re-index is
// still taken back by the Unassume of the pod given to Assume.
func TestUnassumeAfterReindex(t *testing.T) {
	c, _ := startCache(t, byInstance, nil)
	p := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Model()
	c.Assume(p, []string{"shop/cache"}, nil)
	if err := c.SetKeyFunc(context.Background(), byInstanceAndRole, nil); err != nil {
		t.Fatal(err)
	}
	if got := names(c.Peers([]string{"shop/cache/master"}, "")); !cmp.Equal(got, []string{"shop/cache-0"}) {
		t.Fatalf("Peers() of the assumed pod after the re-index = %v", got)
	}
	c.Unassume(p)
	if got := c.PodCount(); got != 0 {
		t.Errorf("PodCount() after Unassume = %d, want 0", got)
	}
}

// TestAssumeRefusedUnderAnotherPolicy: a bind judged under a policy that is
// no longer the index's records nothing, so that it is judged again.
func TestAssumeRefusedUnderAnotherPolicy(t *testing.T) {
	c, _ := startCache(t, byInstance, nil)
	p := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Node("node-1").Model()
	if c.Assume(p, []string{"shop/cache"}, func() bool { return false }) {
		t.Error("Assume() = true under a policy that is no longer current")
	}
	if got := c.PodCount(); got != 0 {
		t.Errorf("PodCount() = %d, want 0", got)
	}
	if !c.Assume(p, []string{"shop/cache"}, func() bool { return true }) || c.PodCount() != 1 {
		t.Error("Assume() under the current policy did not record the pod")
	}
}
