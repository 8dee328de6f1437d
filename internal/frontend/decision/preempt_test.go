package decision

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

func meta(uids ...string) *extenderv1.MetaVictims {
	mv := &extenderv1.MetaVictims{Pods: []*extenderv1.MetaPod{}}
	for _, u := range uids {
		mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: u})
	}
	return mv
}

func TestPreempt(t *testing.T) {
	bound := []*model.Pod{
		fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("node-1").Model(),                // low priority, conflicts with master 0
		fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),                  // low priority, but protected
		fixture.MakePod().Namespace("shop").Name("cache-2-replica").Redis("cache", "replica", "2").Node("node-3").Priority(2000).Model(), // conflicts with nothing of shard 0
		fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-3").Model(),
	}
	pod := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Priority(1000).Model()
	tests := []struct {
		name string
		args *extenderv1.ExtenderPreemptionArgs
		want map[string]*extenderv1.MetaVictims
	}{
		{
			name: "conflicting lower-priority peer is added to an empty victim list",
			args: &extenderv1.ExtenderPreemptionArgs{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"node-1": meta(),
			}},
			want: map[string]*extenderv1.MetaVictims{"node-1": meta("uid-cache-0-replica")},
		},
		{
			name: "node whose conflict is a protected master is dropped",
			args: &extenderv1.ExtenderPreemptionArgs{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"node-2": meta("uid-cache-1-master"),
			}},
			want: map[string]*extenderv1.MetaVictims{},
		},
		{
			// node-3 (zone-c) is the one node without a conflict: node-4
			// shares zone-a with the replica of shard 0.
			name: "victims without conflicts pass unchanged, unprotected ones only",
			args: &extenderv1.ExtenderPreemptionArgs{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"node-3": {Pods: []*extenderv1.MetaPod{{UID: "uid-unrelated"}, {UID: "uid-es-data-0"}}, NumPDBViolations: 1},
			}},
			want: map[string]*extenderv1.MetaVictims{
				"node-3": {Pods: []*extenderv1.MetaPod{{UID: "uid-unrelated"}, {UID: "uid-es-data-0"}}, NumPDBViolations: 1},
			},
		},
		{
			// The replica of shard 0 stands on node-1, in node-4's zone-a:
			// no eviction on node-4 removes it.
			name: "node in the zone of a conflicting peer on another node is dropped",
			args: &extenderv1.ExtenderPreemptionArgs{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"node-4": meta(),
			}},
			want: map[string]*extenderv1.MetaVictims{},
		},
		{
			name: "full victims (not node-cache-capable) are read too",
			args: &extenderv1.ExtenderPreemptionArgs{NodeNameToVictims: map[string]*extenderv1.Victims{
				"node-1": {Pods: []*v1.Pod{podObject(bound[0])}},
				"node-2": {Pods: []*v1.Pod{}},
			}},
			want: map[string]*extenderv1.MetaVictims{"node-1": meta("uid-cache-0-replica")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDecider(t, bound, prometheus.NewRegistry())
			tt.args.Pod = pendingPod(pod)
			got, err := d.Preempt(context.Background(), tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.NodeNameToMetaVictims); diff != "" {
				t.Errorf("Preempt() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreemptHigherPriorityConflictDropsNode(t *testing.T) {
	// The replica on node-1 outranks the pending master: preemption cannot
	// evict it, so node-1 cannot help.
	d, _ := newDecider(t,
		[]*model.Pod{fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("node-1").Priority(5000).Model()},
		prometheus.NewRegistry(),
	)
	got, err := d.Preempt(context.Background(), &extenderv1.ExtenderPreemptionArgs{
		Pod:                   pendingPod(fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Priority(1000).Model()),
		NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{"node-1": meta("uid-other")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.NodeNameToMetaVictims) != 0 {
		t.Errorf("Preempt() kept %v, want no node", got.NodeNameToMetaVictims)
	}
}
