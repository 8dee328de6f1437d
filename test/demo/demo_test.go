package demo

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	ls "github.com/regosched/regosched/test/localstack"
)

func TestWorkload(t *testing.T) {
	pods := Workload(6, "uid-logs-master")
	count := map[string]int{}
	for _, p := range pods {
		if p.Namespace != Namespace || p.Spec.SchedulerName != ls.SchedulerName {
			t.Errorf("%s/%s: namespace %q, scheduler %q", p.Namespace, p.Name, p.Namespace, p.Spec.SchedulerName)
		}
		count[ls.Describe(p.Labels)]++
	}
	want := map[string]int{
		"redis cache master, shard 0": 1, "redis cache replica, shard 0": 1,
		"redis cache master, shard 1": 1, "redis cache replica, shard 1": 1,
		"redis cache master, shard 2": 1, "redis cache replica, shard 2": 1,
		"elasticsearch logs data":   7, // one more than nodes
		"elasticsearch logs master": 3, // a StatefulSet of three: one per zone
		"plain pod":                 2,
	}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("Workload(6) mismatch (-want +got):\n%s", diff)
	}
}

func TestWrite(t *testing.T) {
	pl := ls.Placement{
		Nodes: []ls.NodePlacement{
			{Node: "node-01", Zone: "zone-a", Pods: []ls.PodSummary{
				{Namespace: "shop", Name: "cache-0-master", Description: "redis cache master, shard 0"},
				{Namespace: "shop", Name: "logs-data-1", Description: "elasticsearch logs data"},
			}},
			{Node: "node-02", Zone: "zone-b"},
		},
		Pending: []ls.PendingPod{{
			PodSummary: ls.PodSummary{Namespace: "shop", Name: "logs-data-2", Description: "elasticsearch logs data"},
			Reason: "0/2 nodes are available: 1 elasticsearch: data shop/logs-data-1 of cluster logs already on this node, " +
				"1 node(s) had untolerated taint. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
		}},
	}
	tests := []struct {
		name       string
		violations []string
		want       string
	}{
		{"kept", nil, `NODE     ZONE    PODS
node-01  zone-a  shop/cache-0-master (redis cache master, shard 0)
                 shop/logs-data-1 (elasticsearch logs data)
node-02  zone-b  -

pending:
  shop/logs-data-2 (elasticsearch logs data)
    0/2 nodes are available:
      1 elasticsearch: data shop/logs-data-1 of cluster logs already on this node
      1 node(s) had untolerated taint
    preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.

zones:
  redis cache shard 0: master in zone-a

rules kept: yes (0 violations)
`},
		{"broken", []string{"node node-01: a and b"}, "\nrules kept: NO (1 violations)\n  node node-01: a and b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := Write(&b, pl, tt.violations); err != nil {
				t.Fatal(err)
			}
			if tt.name == "kept" {
				if diff := cmp.Diff(tt.want, b.String()); diff != "" {
					t.Errorf("Write() mismatch (-want +got):\n%s", diff)
				}
			} else if !strings.HasSuffix(b.String(), tt.want) {
				t.Errorf("Write() = %q, want suffix %q", b.String(), tt.want)
			}
		})
	}
}

func TestReasonLines(t *testing.T) {
	tests := []struct {
		msg  string
		want []string
	}{
		{"", []string{"(no FailedScheduling event yet)"}},
		{"something else: entirely", []string{"something else: entirely"}},
		{"0/1 nodes are available: 1 Insufficient cpu.", []string{"0/1 nodes are available:", "  1 Insufficient cpu"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, reasonLines(tt.msg)); diff != "" {
			t.Errorf("reasonLines(%q) mismatch (-want +got):\n%s", tt.msg, diff)
		}
	}
}
