package plugin

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/test/fixture"
)

// The preemption dry run: RemovePod and AddPod on a clone of the state
// change what Filter says there and nowhere else.
func TestPreemptionDryRun(t *testing.T) {
	f := newHarnessWith(t, options{unprotected: true})
	pod := fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(500).Obj()
	cs, _ := f.preFilter(t, pod)
	ctx := context.Background()
	victim := fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1").Obj()
	nominated := fixture.MakePod().Namespace(ns).Name("cache-3-master").Redis("cache", "master", "3").Priority(800).Obj()
	unrelated := fixture.MakePod().Namespace(ns).Name("web").Schedulable().Node("n1").Obj()

	steps := []struct {
		name string
		do   func(clone fwk.CycleState) *fwk.Status
		want map[string]string
	}{
		{
			name: "the lower-priority peer removed",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.RemovePod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
			},
			want: map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
		{
			name: "and an unrelated pod added back",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, unrelated), f.nodes["n1"])
			},
			want: map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
		{
			name: "and the peer reprieved",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok},
		},
		{
			name: "a nominated master put on n3",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, nominated), f.nodes["n3"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": unresolvable},
		},
		{
			name: "and taken off again",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.RemovePod(ctx, clone, pod, podInfo(t, nominated), f.nodes["n3"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok},
		},
	}
	clone := cs.Clone()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if st := s.do(clone); !st.IsSuccess() {
				t.Fatalf("extension = %v", st)
			}
			if diff := cmp.Diff(s.want, f.filter(t, clone, pod)); diff != "" {
				t.Errorf("Filter on the clone (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the original state is untouched", func(t *testing.T) {
		clone := cs.Clone()
		_ = f.pl.RemovePod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
		want := map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok}
		if diff := cmp.Diff(want, f.filter(t, cs, pod)); diff != "" {
			t.Errorf("Filter on the original (-want +got):\n%s", diff)
		}
	})
}
