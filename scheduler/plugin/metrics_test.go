package plugin

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/test/fixture"
)

// regosched's metrics are registered where the plugin is told (the
// scheduler's legacyregistry, for its /metrics), and the plugin's denials
// are counted as the extender's.
func TestMetrics(t *testing.T) {
	f := newHarness(t)
	if _, st := f.preFilter(t, fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(500).Obj()); !st.IsSuccess() {
		t.Fatalf("PreFilter = %v", st)
	}
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	denials := 0.0
	for _, mf := range families {
		names = append(names, mf.GetName())
		if mf.GetName() == "regosched_filter_denials_total" {
			for _, m := range mf.GetMetric() {
				denials += m.GetCounter().GetValue()
			}
		}
	}
	// regosched_policy_reloads_total has no series before the first reload.
	want := []string{
		"regosched_cached_nodes", "regosched_cached_pods", "regosched_filter_denials_total",
		"regosched_pending_descriptions_total", "regosched_policy_info",
	}
	var got []string
	for _, n := range want {
		if slices.Contains(names, n) {
			got = append(got, n)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics registered (-want +got):\n%s", diff)
	}
	// Two masters of the cluster, on n1 and n2: two denials of redis-masters,
	// and two of redis-masters-quorum (three masters, the pod counted, may
	// hold one per zone: zone-a and zone-b are full).
	if denials != 4 {
		t.Errorf("regosched_filter_denials_total = %v, want 4", denials)
	}
}
