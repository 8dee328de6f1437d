package plugin

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/regosched/regosched/test/fixture"
)

func TestFilter(t *testing.T) {
	f := newHarness(t)
	tests := []struct {
		name    string
		pod     *corev1.Pod
		wantPre string
		want    map[string]string
	}{
		{
			// The policy protects masters: preemption may evict neither, not
			// even the lower-priority one (the conformance table has the
			// peers preemption may evict).
			name:    "a master avoids both masters, which the policy protects from preemption",
			pod:     fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(500).Obj(),
			wantPre: ok,
			want:    map[string]string{"n1": unresolvable, "n2": unresolvable, "n3": ok},
		},
		{
			name:    "a master of priority 100 preempts no peer of equal priority",
			pod:     fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(100).Obj(),
			wantPre: ok,
			want:    map[string]string{"n1": unresolvable, "n2": unresolvable, "n3": ok},
		},
		{
			name:    "a replica avoids its own shard's master only",
			pod:     fixture.MakePod().Namespace(ns).Name("cache-1-replica").Redis("cache", "replica", "1").Priority(2000).Obj(),
			wantPre: ok,
			want:    map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, st := f.preFilter(t, tt.pod)
			if got := st.Code().String(); got != tt.wantPre {
				t.Fatalf("PreFilter = %v, want %s", st, tt.wantPre)
			}
			if diff := cmp.Diff(tt.want, f.filter(t, cs, tt.pod)); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFilterPerZone: with n4 in zone-a beside n1, cache-0's master on n1
// keeps a replica of its shard out of both; preemption can free n1 alone,
// where the master stands.
func TestFilterPerZone(t *testing.T) {
	n4 := fixture.MakeNode().Name("n4").Hostname().Zone("zone-a").Obj()
	tests := []struct {
		name string
		opts options
		pod  *corev1.Pod
		want map[string]string
	}{
		{
			name: "a replica avoids its master's zone; the protected master makes both unresolvable",
			pod:  fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Priority(2000).Obj(),
			want: map[string]string{"n1": unresolvable, "n2": ok, "n3": ok, "n4": unresolvable},
		},
		{
			// Evicting the master frees n1; on n4 it is no victim.
			name: "an unprotected lower-priority master: n1 resolvable, n4 not",
			opts: options{unprotected: true},
			pod:  fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Priority(2000).Obj(),
			want: map[string]string{"n1": unsched, "n2": ok, "n3": ok, "n4": unresolvable},
		},
		{
			// Per node its shard may be any master's; per zone the shard is
			// exact, and an unknown one is neither 0 nor 1.
			name: "a replica of unknown shard avoids every master's node, and no zone",
			pod:  fixture.MakePod().Namespace(ns).Name("cache-x-replica").Redis("cache", "replica", "").Priority(2000).Obj(),
			want: map[string]string{"n1": unresolvable, "n2": unresolvable, "n3": ok, "n4": ok},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.moreNodes = append(tt.opts.moreNodes, n4)
			f := newHarnessWith(t, tt.opts)
			cs, st := f.preFilter(t, tt.pod)
			if !st.IsSuccess() {
				t.Fatalf("PreFilter = %v", st)
			}
			if diff := cmp.Diff(tt.want, f.filter(t, cs, tt.pod)); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

// The cache and the scheduler's snapshot disagree about a conflicting peer:
// the API server settles it.
func TestFilterWhenTheViewsDisagree(t *testing.T) {
	pod := fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(500).Obj()
	tests := []struct {
		name string
		opts options
		want map[string]string
	}{
		{
			name: "a peer deleted: the snapshot and the API server no longer have it",
			opts: options{notInSnapshot: []string{"cache-0-master"}, deleted: []string{"cache-0-master"}},
			want: map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
		{
			name: "a peer bound: the snapshot does not have it yet, the API server does",
			opts: options{notInSnapshot: []string{"cache-1-master"}},
			want: map[string]string{"n1": unresolvable, "n2": unresolvable, "n3": ok},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newHarnessWith(t, tt.opts)
			cs, st := f.preFilter(t, pod)
			if !st.IsSuccess() {
				t.Fatalf("PreFilter = %v", st)
			}
			if diff := cmp.Diff(tt.want, f.filter(t, cs, pod)); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterWithoutPreFilterIsAnError(t *testing.T) {
	f := newHarness(t)
	pod := fixture.MakePod().Namespace(ns).Name("x").Redis("cache", "master", "2").Priority(1).Obj()
	st := f.pl.Filter(context.Background(), framework.NewCycleState(), pod, f.nodes["n1"])
	if st.Code() != fwk.Error {
		t.Errorf("Filter = %v, want Error", st)
	}
}
