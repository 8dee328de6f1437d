package benche2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/test/fixture"
)

func TestPrebound(t *testing.T) {
	w := DefaultWorkload()
	nodes := make([]string, 5000)
	zoneOf := map[string]string{} // zones a, b, c in turn, as the local cluster's
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%02d", i+1)
		zoneOf[nodes[i]] = string(rune('a' + i%3))
	}
	for _, mode := range Modes {
		t.Run(mode.Name(), func(t *testing.T) {
			pods, err := w.Prebound(mode, "x1", 10000, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if len(pods) != 10000 {
				t.Fatalf("%d pods, want 10000", len(pods))
			}
			scheduled := map[string]bool{}
			for _, p := range w.Pods(mode, "x1") {
				scheduled[p.Labels[fixture.LabelInstance]] = true
			}
			perNode := map[string]int{}
			roles := map[string]int{}
			names := map[string]bool{}
			for _, p := range pods {
				key := p.Namespace + "/" + p.Name
				if names[key] {
					t.Fatalf("duplicate pod %s", key)
				}
				names[key] = true
				if p.Spec.NodeName == "" || p.Labels[LabelPrebound] != "x1" || p.Labels[LabelRun] != "" {
					t.Fatalf("pod %s: node %q, labels %v", key, p.Spec.NodeName, p.Labels)
				}
				if scheduled[p.Labels[fixture.LabelInstance]] {
					t.Fatalf("pod %s shares its cluster with a scheduled pod", key)
				}
				if !strings.HasPrefix(p.Namespace, "bench-x1-") || p.Spec.SchedulerName != mode.SchedulerName() {
					t.Fatalf("pod %s: namespace or scheduler %q", key, p.Spec.SchedulerName)
				}
				if hasAffinity := p.Spec.Affinity != nil; hasAffinity != (mode == ModeNative) {
					t.Fatalf("pod %s: affinity %v in mode %s", key, p.Spec.Affinity, mode)
				}
				perNode[p.Spec.NodeName]++
				roles[p.Labels[fixture.LabelName]+"/"+p.Labels[fixture.LabelComponent]]++
			}
			if len(perNode) != 5000 {
				t.Errorf("pods on %d nodes, want all 5000", len(perNode))
			}
			// 909 pairs of a Redis cluster (6) and an Elasticsearch one (5),
			// then one master of the 910th Redis cluster.
			want := map[string]int{"redis/master": 2728, "redis/replica": 2727, "elasticsearch/data": 4545}
			if diff := cmp.Diff(want, roles); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
			all := make([]corev1.Pod, 0, len(pods))
			for _, p := range pods {
				all = append(all, *p)
			}
			if v := Violations(all, zoneOf); len(v) != 0 {
				t.Errorf("pre-bound pods break rules: %v", v[:min(len(v), 5)])
			}
		})
	}
	if pods, err := w.Prebound(ModeNative, "x", 0, nil); err != nil || pods != nil {
		t.Errorf("Prebound(0) = %d pods, %v", len(pods), err)
	}
	if _, err := w.Prebound(ModeNative, "x", 10, nodes[:5]); err == nil {
		t.Error("Prebound on 5 nodes: no error; a Redis cluster's six members cannot be apart")
	}
}

func TestParsePoints(t *testing.T) {
	tests := []struct {
		in      string
		want    []Point
		wantErr bool
	}{
		{"1000:0,5000:10000", []Point{{1000, 0}, {5000, 10000}}, false},
		{" 100:50 ", []Point{{100, 50}}, false},
		{"1000", nil, true},
		{"0:0", nil, true},
		{"100:-1", nil, true},
		{"5:10", nil, true},
		{"x:1", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePoints(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParsePoints(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParsePoints(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestWritePlot(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(m Mode, secs float64) Result {
		return Result{Mode: m, Pods: 1500, Bound: 1500, CreateStart: start,
			LastBound: start.Add(time.Duration(secs * float64(time.Second)))}
	}
	points := []PointResult{
		{Point: Point{Nodes: 1000}, Pods: 1500, Results: []Result{res(ModeRegosched, 20), res(ModeNative, 11), res(ModeNoRules, 9)}},
		{Point: Point{Nodes: 5000, Bound: 10000}, Pods: 1500, Results: []Result{res(ModeRegosched, 23), res(ModeNative, 51), res(ModeNoRules, 9)}},
	}
	dir := t.TempDir()
	tests := []struct {
		file   string
		header []byte
		texts  []string
	}{
		{"t.png", []byte("\x89PNG\r\n\x1a\n"), nil},
		{"t.svg", []byte("<?xml"), []string{"regosched", "native", "norules", "10,000 bound", "75/s", "29/s"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			if err := CheckPlotPath(path); err != nil {
				t.Fatal(err)
			}
			if err := WritePlot(path, points); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, tt.header) {
				t.Errorf("%s starts %q", tt.file, data[:min(len(data), 16)])
			}
			for _, s := range tt.texts {
				if !bytes.Contains(data, []byte(s)) {
					t.Errorf("%s lacks %q", tt.file, s)
				}
			}
		})
	}
	if err := CheckPlotPath("x.pdf"); err == nil {
		t.Error("CheckPlotPath(x.pdf) passed")
	}
	if err := WritePlot(filepath.Join(dir, "none.png"), nil); err == nil {
		t.Error("WritePlot with no points succeeded")
	}
}

// With several rounds, a rate is the median of its rounds and violations
// add up; the round-by-round line lists every rate.
func TestPointResultRounds(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(m Mode, secs float64, viol int) Result {
		return Result{Mode: m, Pods: 1500, Bound: 1500, CreateStart: start,
			LastBound: start.Add(time.Duration(secs * float64(time.Second))), Violations: make([]string, viol)}
	}
	pr := PointResult{Point: Point{Nodes: 1000}, Pods: 1500, Results: []Result{
		res(ModeRegosched, 15, 0), res(ModeNative, 10, 0),
		res(ModeRegosched, 20, 1), res(ModeNative, 12, 0),
		res(ModeRegosched, 12, 0), res(ModeNative, 10, 2),
	}}
	tests := []struct {
		mode     Mode
		wantRate float64
		wantOK   bool
		wantViol int
	}{
		{ModeRegosched, 100, true, 1}, // 75, 100, 125
		{ModeNative, 150, true, 2},    // 150, 125, 150
		{ModeNoRules, 0, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.mode.Name(), func(t *testing.T) {
			rate, ok := pr.Rate(tt.mode)
			if rate != tt.wantRate || ok != tt.wantOK {
				t.Errorf("Rate = %v, %v; want %v, %v", rate, ok, tt.wantRate, tt.wantOK)
			}
			if got := pr.Violations(tt.mode); got != tt.wantViol {
				t.Errorf("Violations = %d, want %d", got, tt.wantViol)
			}
		})
	}
	even := PointResult{Results: []Result{res(ModeNoRules, 10, 0), res(ModeNoRules, 15, 0)}}
	if rate, _ := even.Rate(ModeNoRules); rate != 125 {
		t.Errorf("median of 150 and 100 = %v, want 125", rate)
	}
	wantLine := "throughput nodes=1000 bound=0 pods=1500 regosched=100.0/s native=150.0/s norules=0.0/s violations_regosched=1 violations_native=2 regosched_scheduler=0.0/s violations_regosched_scheduler=-1"
	if diff := cmp.Diff(wantLine, pr.Line()); diff != "" {
		t.Errorf("Line() (-want +got):\n%s", diff)
	}
	wantRounds := "regosched 100.0 75.0 125.0 (median 100.0); native 150.0 125.0 150.0 (median 150.0)"
	if diff := cmp.Diff(wantRounds, pr.Rounds()); diff != "" {
		t.Errorf("Rounds() (-want +got):\n%s", diff)
	}
}
