package localstack

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/test/localcluster"
)

func TestWithoutBindVerb(t *testing.T) {
	root, err := localcluster.FindRepoRoot()
	if err != nil {
		t.Skip(err)
	}
	base, err := os.ReadFile(filepath.Join(root, schedulerConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := localcluster.SchedulerConfig(base, "/k", "http://127.0.0.1:1/scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "bindVerb: bind") {
		t.Fatalf("deployed configuration has no bindVerb any more:\n%s", cfg)
	}
	out, err := withoutBindVerb(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Extenders []map[string]any `json:"extenders"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Extenders) != 1 {
		t.Fatalf("extenders = %v", doc.Extenders)
	}
	e := doc.Extenders[0]
	if _, ok := e["bindVerb"]; ok {
		t.Errorf("bindVerb still there: %v", e)
	}
	for _, k := range []string{"filterVerb", "preemptVerb", "urlPrefix", "nodeCacheCapable", "ignorable"} {
		if _, ok := e[k]; !ok {
			t.Errorf("%s lost: %v", k, e)
		}
	}
}

func TestParseHistogram(t *testing.T) {
	body := []byte(`# TYPE regosched_inflight_wait_seconds histogram
regosched_inflight_wait_seconds_bucket{le="0.0005"} 3
regosched_inflight_wait_seconds_bucket{le="0.00125"} 5
regosched_inflight_wait_seconds_bucket{le="+Inf"} 6
regosched_inflight_wait_seconds_sum 0.25
regosched_inflight_wait_seconds_count 6
`)
	h, err := ParseHistogram(body, "regosched_inflight_wait_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if h.Count != 6 || h.Sum != 0.25 || len(h.Buckets) != 3 || !math.IsInf(h.Buckets[2].LE, 1) || h.Buckets[1].Count != 5 {
		t.Fatalf("ParseHistogram() = %+v", h)
	}
	d := h.Sub(Histogram{Sum: 0.05, Count: 2, Buckets: []Bucket{{0.0005, 2}, {0.00125, 2}, {math.Inf(1), 2}}})
	if d.Count != 4 || d.Buckets[0].Count != 1 || d.Buckets[2].Count != 4 {
		t.Errorf("Sub() = %+v", d)
	}
	if got := d.String(); !strings.Contains(got, "count 4") || !strings.Contains(got, "<=+Inf: 1") {
		t.Errorf("String() = %q", got)
	}
	if _, err := ParseHistogram(body, "missing"); err == nil {
		t.Error("missing histogram parsed")
	}
}
