package benche2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/test/fixture"
	ls "github.com/regosched/regosched/test/localstack"
)

func TestWorkloadPods(t *testing.T) {
	w := DefaultWorkload()
	if got := w.Size(); got != 1500 {
		t.Fatalf("default workload has %d pods, want 1500", got)
	}
	for _, mode := range Modes {
		pods := w.Pods(mode, string(mode))
		if len(pods) != w.Size() {
			t.Fatalf("%s: %d pods, want %d", mode, len(pods), w.Size())
		}
		names := map[string]bool{}
		count := map[string]int{}
		nss := map[string]bool{}
		for _, p := range pods {
			key := p.Namespace + "/" + p.Name
			if names[key] {
				t.Fatalf("%s: duplicate pod %s", mode, key)
			}
			names[key] = true
			nss[p.Namespace] = true
			count[p.Labels[fixture.LabelName]+"/"+p.Labels[fixture.LabelComponent]]++
			if p.Labels[LabelRun] != string(mode) || p.Spec.SchedulerName != mode.SchedulerName() {
				t.Fatalf("%s: pod %s has run %q, scheduler %q", mode, key, p.Labels[LabelRun], p.Spec.SchedulerName)
			}
			if p.Labels[fixture.LabelInstance] == "" || (p.Labels[fixture.LabelName] == "redis" && p.Labels[fixture.LabelShard] == "") {
				t.Fatalf("%s: pod %s lacks cluster or shard labels: %v", mode, key, p.Labels)
			}
			if !strings.HasPrefix(p.Namespace, "bench-"+string(mode)+"-") {
				t.Fatalf("%s: pod %s not in the run's namespaces", mode, key)
			}
			if hasAffinity := p.Spec.Affinity != nil; hasAffinity != (mode == ModeNative) {
				t.Fatalf("%s: pod %s affinity %v", mode, key, p.Spec.Affinity)
			}
			cpu := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
			if cpu.MilliValue() > 100 {
				t.Fatalf("%s: pod %s requests %s cpu, want tiny", mode, key, cpu.String())
			}
		}
		want := map[string]int{"redis/master": 450, "redis/replica": 450, "elasticsearch/data": 600}
		if diff := cmp.Diff(want, count); diff != "" {
			t.Errorf("%s: roles (-want +got):\n%s", mode, diff)
		}
		if len(nss) != w.Namespaces {
			t.Errorf("%s: %d namespaces, want %d", mode, len(nss), w.Namespaces)
		}
	}
	if ModeRegosched.SchedulerName() != ls.SchedulerName {
		t.Errorf("regosched mode asks for scheduler %q", ModeRegosched.SchedulerName())
	}
}

func TestWorkloadValidate(t *testing.T) {
	for _, w := range []Workload{{}, {RedisClusters: 1, RedisShards: 1}, {RedisClusters: -1, Namespaces: 1}} {
		if w.Validate() == nil {
			t.Errorf("Validate(%+v) passed", w)
		}
	}
	if err := DefaultWorkload().Validate(); err != nil {
		t.Error(err)
	}
}

func TestNativeRules(t *testing.T) {
	rules := func(p *corev1.Pod) []string {
		a, spread := NativeRules(p.Labels)
		if a == nil {
			return nil
		}
		var out []string
		for _, tm := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			out = append(out, tm.LabelSelector.MatchLabels[fixture.LabelName]+"/"+tm.LabelSelector.MatchLabels[fixture.LabelComponent]+
				" keys="+strings.Join(tm.MatchLabelKeys, "+")+" on "+tm.TopologyKey)
		}
		for _, c := range spread {
			out = append(out, fmt.Sprintf("spread %s/%s keys=%s over %s, skew %d, %s", c.LabelSelector.MatchLabels[fixture.LabelName],
				c.LabelSelector.MatchLabels[fixture.LabelComponent], strings.Join(c.MatchLabelKeys, "+"), c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable))
		}
		return out
	}
	tests := []struct {
		pod  *corev1.Pod
		want []string
	}{
		{fixture.MakePod().Namespace("n").Name("m").Redis("c", "master", "0").Schedulable().Obj(), []string{
			"redis/master keys=app.kubernetes.io/instance on kubernetes.io/hostname",
			"redis/replica keys=app.kubernetes.io/instance+regosched.io/shard on kubernetes.io/hostname",
			"redis/replica keys=app.kubernetes.io/instance+regosched.io/shard on topology.kubernetes.io/zone",
			"spread redis/master keys=app.kubernetes.io/instance over topology.kubernetes.io/zone, skew 1, DoNotSchedule",
		}},
		{fixture.MakePod().Namespace("n").Name("r").Redis("c", "replica", "0").Schedulable().Obj(), []string{
			"redis/master keys=app.kubernetes.io/instance+regosched.io/shard on kubernetes.io/hostname",
			"redis/master keys=app.kubernetes.io/instance+regosched.io/shard on topology.kubernetes.io/zone",
		}},
		{fixture.MakePod().Namespace("n").Name("d").Elasticsearch("c", "data").Schedulable().Obj(), []string{
			"elasticsearch/data keys=app.kubernetes.io/instance on kubernetes.io/hostname",
		}},
		{fixture.MakePod().Namespace("n").Name("m").Elasticsearch("c", "master").Schedulable().Obj(), nil},
		{fixture.MakePod().Namespace("n").Name("p").Schedulable().Obj(), nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, rules(tt.pod)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.pod.Name, diff)
		}
	}
}

// TestViolations runs the checker on synthetic placements of the
// workload's own pods: one bad pair per rule, and a clean placement.
func TestViolations(t *testing.T) {
	w := Workload{RedisClusters: 2, RedisShards: 2, ESClusters: 2, ESDataPods: 3, Namespaces: 1}
	pods := w.Pods(ModeNoRules, "x")
	byName := map[string]*corev1.Pod{}
	for i, p := range pods {
		p.Spec.NodeName = "node-" + string(rune('a'+i)) // all apart
		byName[p.Name] = p
	}
	place := func() []corev1.Pod {
		out := make([]corev1.Pod, len(pods))
		for i, p := range pods {
			out[i] = *p
		}
		return out
	}
	if v := Violations(place(), nil); len(v) != 0 {
		t.Fatalf("all apart: %v", v)
	}

	// Allowed neighbours: masters of different clusters, master and replica
	// of different shards, data pods of different clusters.
	byName["redis-000-0-master"].Spec.NodeName = "shared"
	byName["redis-001-0-master"].Spec.NodeName = "shared"
	byName["redis-000-1-replica"].Spec.NodeName = "shared"
	byName["es-000-data-0"].Spec.NodeName = "shared"
	byName["es-001-data-0"].Spec.NodeName = "shared"
	if v := Violations(place(), nil); len(v) != 0 {
		t.Fatalf("allowed neighbours: %v", v)
	}

	// One pair per rule.
	byName["redis-001-1-master"].Spec.NodeName = "n1"
	byName["redis-001-0-master"].Spec.NodeName = "n1"
	byName["redis-000-1-master"].Spec.NodeName = "n2"
	byName["redis-000-1-replica"].Spec.NodeName = "n2"
	byName["es-001-data-1"].Spec.NodeName = "n3"
	byName["es-001-data-2"].Spec.NodeName = "n3"
	got := Violations(place(), nil)
	want := []string{
		"node n1: bench-x-00/redis-001-0-master and bench-x-00/redis-001-1-master (two redis masters of a cluster)",
		"node n2: bench-x-00/redis-000-1-master and bench-x-00/redis-000-1-replica (redis master and replica of a shard)",
		"node n3: bench-x-00/es-001-data-1 and bench-x-00/es-001-data-2 (two elasticsearch data pods of a cluster)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Violations (-want +got):\n%s", diff)
	}

	// Per zone: the master and the replica of a shard on two nodes of one
	// zone.
	zoneOf := map[string]string{"za1": "a", "za2": "a"}
	byName["redis-000-0-master"].Spec.NodeName = "za1"
	byName["redis-000-0-replica"].Spec.NodeName = "za2"
	want = []string{"zone of bench-x-00/redis-000/0/a: bench-x-00/redis-000-0-master and bench-x-00/redis-000-0-replica (redis master and replica of a shard)"}
	if diff := cmp.Diff(want, Violations(place(), zoneOf)[3:]); diff != "" {
		t.Errorf("Violations per zone (-want +got):\n%s", diff)
	}

	// Pending pods break nothing.
	for _, p := range pods {
		p.Spec.NodeName = ""
	}
	if v := Violations(place(), nil); len(v) != 0 {
		t.Fatalf("all pending: %v", v)
	}
}

func TestPointResultLine(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(m Mode, secs float64, viol int) Result {
		return Result{
			Mode: m, Pods: 1500, Bound: 1500,
			CreateStart: start, CreateEnd: start.Add(5 * time.Second),
			SchedStart: start.Add(5 * time.Second), FirstBound: start.Add(6 * time.Second),
			LastBound:  start.Add(5*time.Second + time.Duration(secs*float64(time.Second))),
			Violations: make([]string, viol),
		}
	}
	all := []Result{res(ModeRegosched, 7.5, 0), res(ModeNative, 6, 0), res(ModeNoRules, 5, 3), res(ModePlugin, 6.5, 0)}
	format := regexp.MustCompile(`^throughput nodes=\d+ bound=\d+ pods=\d+ regosched=[0-9.]+/s native=[0-9.]+/s norules=[0-9.]+/s violations_regosched=-?\d+ violations_native=-?\d+ regosched_scheduler=[0-9.]+/s violations_regosched_scheduler=-?\d+$`)
	tests := []struct {
		name string
		pr   PointResult
		want string
	}{
		{"every configuration", PointResult{Point: Point{Nodes: 5000, Bound: 10000}, Pods: 1500, Results: all},
			"throughput nodes=5000 bound=10000 pods=1500 regosched=120.0/s native=136.4/s norules=150.0/s violations_regosched=0 violations_native=0 regosched_scheduler=130.4/s violations_regosched_scheduler=0"},
		{"no rules only", PointResult{Point: Point{Nodes: 100}, Pods: 1500, Results: []Result{res(ModeNoRules, 1, 0)}},
			"throughput nodes=100 bound=0 pods=1500 regosched=0.0/s native=0.0/s norules=250.0/s violations_regosched=-1 violations_native=-1 regosched_scheduler=0.0/s violations_regosched_scheduler=-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.pr.Line()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Line() (-want +got):\n%s", diff)
			}
			if !format.MatchString(got) {
				t.Errorf("result line %q does not match %s", got, format)
			}
		})
	}
	if r := all[0]; r.RateFromCreate() != 1500/12.5 || r.RateSteady() != 1499/6.5 {
		t.Errorf("rates %v %v", r.RateFromCreate(), r.RateSteady())
	}
	for _, l := range all[2].Details() {
		if strings.Contains(l, "\n") {
			t.Errorf("detail line with a newline: %q", l)
		}
	}
}

func TestParseVerbTimes(t *testing.T) {
	body := []byte(`# HELP regosched_request_duration_seconds Time.
# TYPE regosched_request_duration_seconds histogram
regosched_request_duration_seconds_bucket{outcome="ok",verb="filter",le="0.0001"} 3
regosched_request_duration_seconds_sum{outcome="ok",verb="filter"} 0.5
regosched_request_duration_seconds_count{outcome="ok",verb="filter"} 100
regosched_request_duration_seconds_sum{outcome="error",verb="filter"} 0.1
regosched_request_duration_seconds_count{outcome="error",verb="filter"} 2
regosched_request_duration_seconds_sum{outcome="ok",verb="bind"} 1.5
regosched_request_duration_seconds_count{outcome="ok",verb="bind"} 50
regosched_requests_total{outcome="ok",verb="bind"} 50
`)
	got, err := ParseVerbTimes(body, verbMetric)
	if err != nil {
		t.Fatal(err)
	}
	want := []VerbTime{{Verb: "bind", Count: 50, Sum: 1.5}, {Verb: "filter", Count: 102, Sum: 0.6}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseVerbTimes (-want +got):\n%s", diff)
	}
	waits, err := ParseVerbTimes([]byte(`# TYPE regosched_inflight_wait_seconds histogram
regosched_inflight_wait_seconds_bucket{le="0.0005"} 7
regosched_inflight_wait_seconds_sum 0.25
regosched_inflight_wait_seconds_count 10
regosched_inflight_wait_seconds_sumx 99
`), waitMetric)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]VerbTime{{Verb: "", Count: 10, Sum: 0.25}}, waits); diff != "" {
		t.Errorf("ParseVerbTimes of an unlabelled histogram (-want +got):\n%s", diff)
	}
	d := SubVerbTimes(got, []VerbTime{{Verb: "bind", Count: 50, Sum: 1.5}, {Verb: "filter", Count: 2, Sum: 0.1}})
	if len(d) != 1 || d[0].Verb != "filter" || d[0].Count != 100 || d[0].Mean() < 0.00499 || d[0].Mean() > 0.00501 {
		t.Errorf("SubVerbTimes = %+v", d)
	}
}

func TestParseStat(t *testing.T) {
	// Fields 14 and 15 are utime 250 and stime 50 ticks; the name holds
	// a space and a parenthesis.
	stat := "1234 (kube (api) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	got, err := parseStat(stat)
	if err != nil || got != 3*time.Second {
		t.Errorf("parseStat = %v, %v; want 3s", got, err)
	}
	if _, err := parseStat("garbage"); err == nil {
		t.Error("parseStat(garbage) succeeded")
	}
	line := FormatCPU([]ProcCPU{{"kube-apiserver", 2 * time.Second}, {"etcd", time.Second}}, 1000)
	if line != "kube-apiserver 2.00s (2.00ms/pod), etcd 1.00s (1.00ms/pod), total 3.00s (3.00ms/pod)" {
		t.Errorf("FormatCPU = %q", line)
	}
}

func TestPlainSchedulerConfig(t *testing.T) {
	out, err := yaml.Marshal(PlainSchedulerConfig("/k", "bench-native"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"kind: KubeSchedulerConfiguration", "kubeconfig: /k", "leaderElect: false", "schedulerName: bench-native"} {
		if !strings.Contains(string(out), s) {
			t.Errorf("config lacks %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"a", "regosched", "b", "native", "c", "norules", "d", "null-extender", "e", "regosched-prioritize", "f", "regosched-scheduler"} {
		if _, err := ParseMode(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseMode("g"); err == nil {
		t.Error("ParseMode(g) succeeded")
	}
}
