package judge

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/core/model"
)

func TestScoreNodes(t *testing.T) {
	names := []string{"node-1", "node-2", "node-3", "node-4"}
	zones := map[string]map[string]string{
		"node-1": {"zone": "a"}, "node-2": {"zone": "b"}, "node-3": {"zone": "c"}, "node-4": {"zone": "a"},
	}
	tests := []struct {
		name       string
		penalties  []model.Penalty
		wantOK     bool
		want       []int64 // by candidate, of 0..10
		wantLabels bool    // whether labels are read at all
	}{
		{name: "no penalty, no preference", wantOK: false},
		{
			name:      "a penalty on a node that is no candidate scores none",
			penalties: []model.Penalty{{TopologyKey: model.HostnameKey, Value: "node-9", Weight: 1}},
			wantOK:    false,
		},
		{
			name:      "hostname penalties alone read no labels",
			penalties: []model.Penalty{{TopologyKey: model.HostnameKey, Value: "node-2", Weight: 1}},
			wantOK:    true, want: []int64{10, 0, 10, 10},
		},
		{
			// Totals 3, 1, 0, 2, as the extender's prioritize test has them.
			name: "nodes and zones",
			penalties: []model.Penalty{
				{TopologyKey: model.HostnameKey, Value: "node-1", Weight: 1},
				{TopologyKey: model.HostnameKey, Value: "node-2", Weight: 1},
				{TopologyKey: "zone", Value: "a", Weight: 2},
			},
			wantOK: true, want: []int64{0, 7, 10, 3}, wantLabels: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			readLabels := false
			labels := func(i int, name string) map[string]string {
				if names[i] != name {
					t.Errorf("labels(%d, %q): candidate %d is %q", i, name, i, names[i])
				}
				readLabels = true
				return zones[name]
			}
			for _, buf := range [][]float64{nil, make([]float64, len(names))} {
				sc, ok := ScoreNodes(tt.penalties, names, labels, buf)
				var got []int64
				if ok {
					for i := range names {
						got = append(got, sc.Score(i, 10))
					}
				}
				if diff := cmp.Diff(map[string]any{"ok": tt.wantOK, "scores": tt.want, "labels": tt.wantLabels},
					map[string]any{"ok": ok, "scores": got, "labels": readLabels}); diff != "" {
					t.Errorf("ScoreNodes(buffer %t) (-want +got):\n%s", buf != nil, diff)
				}
			}
		})
	}
}

// TestScoreNodesWithABufferAllocatesNoMore: given the caller's buffer,
// ScoreNodes allocates what summing the penalties (NewTable) does and
// nothing per candidate, so that prioritize's pooled loop can use it.
func TestScoreNodesWithABufferAllocatesNoMore(t *testing.T) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = "node-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	penalties := []model.Penalty{{TopologyKey: model.HostnameKey, Value: names[3], Weight: 1}, {TopologyKey: "zone", Value: "a", Weight: 2}}
	zone := map[string]string{"zone": "a"}
	labels := func(int, string) map[string]string { return zone }
	buf := make([]float64, len(names))
	table := testing.AllocsPerRun(50, func() { NewTable(penalties) })
	got := testing.AllocsPerRun(50, func() { ScoreNodes(penalties, names, labels, buf) })
	if got != table {
		t.Errorf("ScoreNodes with a buffer allocates %v times, NewTable alone %v", got, table)
	}
}
