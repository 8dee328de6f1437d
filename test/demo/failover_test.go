package demo

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/test/localredis"
)

func TestMissingRedis(t *testing.T) {
	tests := []struct {
		name      string
		installed []string
		want      string
	}{
		{"both", []string{"redis-server", "redis-cli"}, ""},
		{"no server", []string{"redis-cli"}, "redis-server"},
		{"no cli", []string{"redis-server"}, "redis-cli"},
		{"neither", nil, "redis-server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookPath := func(prog string) (string, error) {
				for _, p := range tt.installed {
					if p == prog {
						return "/usr/bin/" + prog, nil
					}
				}
				return "", errors.New("not found")
			}
			if diff := cmp.Diff(tt.want, missingRedis(lookPath)); diff != "" {
				t.Errorf("missingRedis() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// start is a fresh cluster as Redis reports it: masters on 7001..7003,
// replicas on 7004..7006 following 7002, 7003, 7001.
var start = []localredis.Node{
	{Port: 7001, Role: localredis.RoleMaster},
	{Port: 7002, Role: localredis.RoleMaster},
	{Port: 7003, Role: localredis.RoleMaster},
	{Port: 7004, Role: localredis.RoleReplica, MasterPort: 7002},
	{Port: 7005, Role: localredis.RoleReplica, MasterPort: 7003},
	{Port: 7006, Role: localredis.RoleReplica, MasterPort: 7001},
}

// failedOver is start after a failover of shard 1 (7002) to 7004.
var failedOver = []localredis.Node{
	{Port: 7001, Role: localredis.RoleMaster},
	{Port: 7002, Role: localredis.RoleReplica, MasterPort: 7004},
	{Port: 7003, Role: localredis.RoleMaster},
	{Port: 7004, Role: localredis.RoleMaster},
	{Port: 7005, Role: localredis.RoleReplica, MasterPort: 7003},
	{Port: 7006, Role: localredis.RoleReplica, MasterPort: 7001},
}

// repaired is failedOver after a repair that hands shard 0 to 7006.
var repaired = []localredis.Node{
	{Port: 7001, Role: localredis.RoleReplica, MasterPort: 7006},
	{Port: 7002, Role: localredis.RoleReplica, MasterPort: 7004},
	{Port: 7003, Role: localredis.RoleMaster},
	{Port: 7004, Role: localredis.RoleMaster},
	{Port: 7005, Role: localredis.RoleReplica, MasterPort: 7003},
	{Port: 7006, Role: localredis.RoleMaster},
}

var nodes = []string{"node-01", "node-02", "node-03", "node-04", "node-05", "node-06"}

func TestLayout(t *testing.T) {
	l, err := newLayout(start, nodes)
	if err != nil {
		t.Fatal(err)
	}
	want := []member{
		{Node: "node-01", Pod: "sessions-redis-cluster-0", Role: "master", Shard: 0},
		{Node: "node-01", Pod: "sessions-redis-cluster-3", Role: "replica", Shard: 1},
		{Node: "node-02", Pod: "sessions-redis-cluster-1", Role: "master", Shard: 1},
		{Node: "node-03", Pod: "sessions-redis-cluster-2", Role: "master", Shard: 2},
		{Node: "node-04", Pod: "sessions-redis-cluster-4", Role: "replica", Shard: 2},
		{Node: "node-05", Pod: "sessions-redis-cluster-5", Role: "replica", Shard: 0},
	}
	if diff := cmp.Diff(want, l.members(start)); diff != "" {
		t.Errorf("members(start) mismatch (-want +got):\n%s", diff)
	}
	if l.promote != 7004 || l.shared != "node-01" {
		t.Errorf("promote %d on %s, want 7004 on node-01", l.promote, l.shared)
	}

	if _, err := newLayout(start, nodes[:4]); err == nil {
		t.Error("newLayout with 4 nodes: no error")
	}
	if _, err := newLayout(start[:3], nodes); err == nil {
		t.Error("newLayout without replicas: no error")
	}
}

func TestCrowded(t *testing.T) {
	l, err := newLayout(start, nodes)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		roles []localredis.Node
		want  []string
	}{
		{"start", start, nil},
		{"failed over", failedOver, []string{"node-01"}},
		{"repaired", repaired, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, crowded(l.members(tt.roles))); diff != "" {
				t.Errorf("crowded() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettled(t *testing.T) {
	mid := append([]localredis.Node(nil), failedOver...)
	mid[1] = localredis.Node{Port: 7002, Role: localredis.RoleMaster} // old master not yet demoted
	tests := []struct {
		name  string
		roles []localredis.Node
		want  bool
	}{
		{"start", start, true},
		{"repaired", repaired, true},
		{"two masters of a shard", mid, false},
		{"a replica missing", start[:5], false},
	}
	for _, tt := range tests {
		if got := settled(tt.roles); got != tt.want {
			t.Errorf("settled(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestLabelsMatch(t *testing.T) {
	want := map[string]string{"m": "master", "r": "replica"}
	same := map[string]string{"r": "m"}
	tests := []struct {
		name string
		got  map[string][2]string
		want bool
	}{
		{"match", map[string][2]string{"m": {"master", "a"}, "r": {"replica", "a"}}, true},
		{"no labels yet", map[string][2]string{"m": {"", ""}, "r": {"", ""}}, false},
		{"no shard", map[string][2]string{"m": {"master", ""}, "r": {"replica", ""}}, false},
		{"other shard", map[string][2]string{"m": {"master", "a"}, "r": {"replica", "b"}}, false},
		{"wrong role", map[string][2]string{"m": {"replica", "a"}, "r": {"replica", "a"}}, false},
	}
	for _, tt := range tests {
		if got := labelsMatch(tt.got, want, same); got != tt.want {
			t.Errorf("labelsMatch(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSampleValue(t *testing.T) {
	body := []byte(`# HELP regosched_violations Pairs of bound pods that break a hard rule.
# TYPE regosched_violations gauge
regosched_violations{namespace="other",rule="redis-masters"} 3
regosched_violations{namespace="sessions",rule="redis-masters"} 1
`)
	tests := []struct {
		name   string
		body   []byte
		sample string
		want   float64
	}{
		{"present", body, violationSample, 1},
		{"other namespace", body, `regosched_violations{namespace="other",rule="redis-masters"}`, 3},
		{"absent after a reset", []byte("# TYPE regosched_violations gauge\n"), violationSample, 0},
		{"prefix only", body, `regosched_violations{namespace="sessions"`, 0},
	}
	for _, tt := range tests {
		got, err := sampleValue(tt.body, tt.sample)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("sampleValue(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRepairOnly(t *testing.T) {
	at := func(sec int) metav1.MicroTime { return metav1.NewMicroTime(time.Unix(int64(sec), 0)) }
	all := []corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Reason: "Repaired", EventTime: at(30)},
		{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Reason: "PlacementViolation", EventTime: at(5)},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Reason: "RepairPlanned", EventTime: at(10)},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Reason: "RepairPlanned", LastTimestamp: metav1.NewTime(time.Unix(20, 0))},
	}
	var got []string
	for _, e := range repairOnly(all) {
		got = append(got, e.Name)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("repairOnly() mismatch (-want +got):\n%s", diff)
	}
}

func TestReportWrite(t *testing.T) {
	l, err := newLayout(start, nodes)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(sent.Add(d)) }
	events := []corev1.Event{
		{Reason: "RepairPlanned", InvolvedObject: corev1.ObjectReference{Name: "sessions-redis-cluster-3"}, Message: "no repair: role unknown", EventTime: at(-800 * time.Millisecond)},
		{Reason: "RepairPlanned", InvolvedObject: corev1.ObjectReference{Name: "sessions-redis-cluster-5"}, Message: "starting: two masters", EventTime: at(12 * time.Second)},
		{Reason: "Repaired", InvolvedObject: corev1.ObjectReference{Name: "sessions-redis-cluster-5"}, Message: "failover cleared it", EventTime: at(14250 * time.Millisecond)},
	}
	table := `
repair after a failover (Redis Cluster "sessions": 3 shards, a master and a replica each; regosched --repair=on)
NODE     POD                       AT START          AFTER FAILOVER    AFTER REPAIR
node-01  sessions-redis-cluster-0  master, shard 0   master, shard 0   replica, shard 0
         sessions-redis-cluster-3  replica, shard 1  master, shard 1   master, shard 1
node-02  sessions-redis-cluster-1  master, shard 1   replica, shard 1  replica, shard 1
node-03  sessions-redis-cluster-2  master, shard 2   master, shard 2   master, shard 2
node-04  sessions-redis-cluster-4  replica, shard 2  replica, shard 2  replica, shard 2
node-05  sessions-redis-cluster-5  replica, shard 0  replica, shard 0  master, shard 0

nodes with two masters: at start none; after the failover node-01; after the repair none
`
	tests := []struct {
		name string
		r    report
		want string
	}{
		{"repaired", report{
			Start: l.members(start), FailedOver: l.members(failedOver), Repaired: l.members(repaired),
			Promoted: "sessions-redis-cluster-3", Shared: "node-01", SentAt: sent, Settled: 1203 * time.Millisecond,
			Reported: 1930 * time.Millisecond, Took: 11240 * time.Millisecond, Intact: 10000, Keys: 10000, Clean: true, Events: events,
		}, table + `failover: CLUSTER FAILOVER to sessions-redis-cluster-3, a replica beside a master on node-01; roles settled 1.2s after it was sent
audit reported it: 1.9s after the failover was sent (regosched_violations{namespace="sessions",rule="redis-masters"} = 1)
repaired: 11.2s after the roles settled (one master per node again, as Redis says)
audit after the repair: clean (0 violations)
keys: 10000 of 10000 read back intact
repair events (time since the failover was sent, reason, pod, message):
  -0.8s RepairPlanned sessions-redis-cluster-3: no repair: role unknown
  +12.0s RepairPlanned sessions-redis-cluster-5: starting: two masters
  +14.2s Repaired sessions-redis-cluster-5: failover cleared it
`},
		{"unseen, unclean, lost keys, no events", report{
			Start: l.members(start), FailedOver: l.members(failedOver), Repaired: l.members(repaired),
			Promoted: "sessions-redis-cluster-3", Shared: "node-01", SentAt: sent, Settled: 1203 * time.Millisecond,
			Took: 11240 * time.Millisecond, Intact: 9998, Keys: 10000,
		}, table + `failover: CLUSTER FAILOVER to sessions-redis-cluster-3, a replica beside a master on node-01; roles settled 1.2s after it was sent
audit reported it: not seen (the gauge was never 1 when looked at)
repaired: 11.2s after the roles settled (one master per node again, as Redis says)
audit after the repair: still reports the violation 20s later
keys: 9998 of 10000 read back with their value; 2 LOST or changed
repair events: none
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := tt.r.write(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("report.write() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
