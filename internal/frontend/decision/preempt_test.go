package decision

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
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
		redis("cache-0-replica", "replica", "0", "node-1", 0),    // low priority, conflicts with master 0
		redis("cache-1-master", "master", "1", "node-2", 0),      // low priority, but protected
		redis("cache-2-replica", "replica", "2", "node-3", 2000), // conflicts with nothing of shard 0
		esData("es-data-0", "node-4"),
	}
	pod := redis("cache-0-master", "master", "0", "", 1000)
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
			name: "victims without conflicts pass unchanged, unprotected ones only",
			args: &extenderv1.ExtenderPreemptionArgs{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"node-3": meta("uid-unrelated"),
				"node-4": {Pods: []*extenderv1.MetaPod{{UID: "uid-es-data-0"}}, NumPDBViolations: 1},
			}},
			want: map[string]*extenderv1.MetaVictims{
				"node-3": meta("uid-unrelated"),
				"node-4": {Pods: []*extenderv1.MetaPod{{UID: "uid-es-data-0"}}, NumPDBViolations: 1},
			},
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
	d, _ := newDecider(t, []*model.Pod{redis("cache-0-replica", "replica", "0", "node-1", 5000)}, prometheus.NewRegistry())
	got, err := d.Preempt(context.Background(), &extenderv1.ExtenderPreemptionArgs{
		Pod:                   pendingPod(redis("cache-0-master", "master", "0", "", 1000)),
		NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{"node-1": meta("uid-other")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.NodeNameToMetaVictims) != 0 {
		t.Errorf("Preempt() kept %v, want no node", got.NodeNameToMetaVictims)
	}
}
