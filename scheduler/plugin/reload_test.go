package plugin

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/test/fixture"
)

// A policy data change is picked up while the scheduler runs, between two
// cycles: a cycle started before keeps the policy it started with, and a
// broken change never replaces the policy in force.
func TestHotReload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n1 := fixture.MakeNode().Name("n1").Hostname().Zone("zone-a").Obj()
	master := fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1").Obj()
	client := fake.NewClientset([]runtime.Object{n1, master}...)
	snapshot := schedcache.NewSnapshot([]*corev1.Pod{master}, []*corev1.Node{n1})
	data := filepath.Join(t.TempDir(), "data.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(data, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{}`)
	log := logrus.New()
	log.SetOutput(io.Discard)
	pl, err := New(ctx, Config{
		Bundles: bundles.Config{Default: regosched.DefaultPolicy(), DataFile: data, Poll: 20 * time.Millisecond, Log: log},
		Client:  client, Snapshot: snapshot, SyncTimeout: 10 * time.Second, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ni, err := snapshot.NodeInfos().Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	pod := fixture.MakePod().Namespace(ns).Name("cache-1-master").Redis("cache", "master", "1").Priority(500).Obj()
	filter := func(cs fwk.CycleState) fwk.Code {
		t.Helper()
		return pl.Filter(ctx, cs, pod, ni).Code()
	}
	cycle := func() fwk.CycleState {
		t.Helper()
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
			t.Fatalf("PreFilter = %v", st)
		}
		return cs
	}
	before := cycle()
	if got := filter(before); got != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("masters protected: Filter = %v, want UnschedulableAndUnresolvable", got)
	}
	first := pl.policies.Load()

	write(`{"workloads":{"redis":{"protected_roles":[]}}}`)
	waitFor(t, func() bool { return pl.policies.Load() != first })
	if got := filter(cycle()); got != fwk.Unschedulable {
		t.Errorf("masters unprotected after the reload: Filter = %v, want Unschedulable", got)
	}
	if got := filter(before); got != fwk.UnschedulableAndUnresolvable {
		t.Errorf("the cycle started before the reload: Filter = %v, want UnschedulableAndUnresolvable", got)
	}

	second := pl.policies.Load()
	write(`{"workloads":`)
	active := pl.policies.(*bundles.Active)
	waitFor(t, func() bool { return active.Status().LastError != "" })
	if pl.policies.Load() != second {
		t.Error("a broken data file replaced the policy")
	}
	if got := filter(cycle()); got != fwk.Unschedulable {
		t.Errorf("after a broken change: Filter = %v, want Unschedulable", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
	}
}
