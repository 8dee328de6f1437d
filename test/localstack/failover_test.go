package localstack

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/test/fixture"
)

func TestFailoverPods(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}
	tests := []struct {
		name             string
		redis, es, plain int
		want             map[string]int // Describe without the cluster's name -> count
		wantFirst        []string       // the first pod names, showing the interleaving
	}{
		{
			name:  "two of each",
			redis: 2, es: 2, plain: 2,
			want: map[string]int{"redis master": 2 * FailoverShards, "redis replica": 2 * FailoverShards,
				"elasticsearch data": 2 * FailoverDataPods, "plain pod": 2},
			wantFirst: []string{"cache-0-0-master", "cache-0-0-replica", "cache-0-1-master"},
		},
		{
			name:      "plain pods only",
			plain:     3,
			want:      map[string]int{"plain pod": 3},
			wantFirst: []string{"plain-0", "plain-1", "plain-2"},
		},
		{name: "nothing", want: map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := FailoverPods("ns", nodes, tt.redis, tt.es, tt.plain)
			got := map[string]int{}
			names := map[string]bool{}
			var first []string
			for _, p := range pods {
				kind := p.Labels[fixture.LabelName] + " " + p.Labels[fixture.LabelComponent]
				if p.Labels[fixture.LabelName] == "" {
					kind = "plain pod"
				}
				got[kind]++
				if names[p.Name] {
					t.Errorf("pod name %s twice", p.Name)
				}
				names[p.Name] = true
				if len(first) < len(tt.wantFirst) {
					first = append(first, p.Name)
				}
				terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if diff := cmp.Diff(nodes, terms[0].MatchExpressions[0].Values); diff != "" {
					t.Errorf("pod %s nodes mismatch (-want +got):\n%s", p.Name, diff)
				}
				if p.Namespace != "ns" || p.Spec.SchedulerName != SchedulerName {
					t.Errorf("pod %s: namespace %q, scheduler %q", p.Name, p.Namespace, p.Spec.SchedulerName)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FailoverPods() kinds mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFirst, first); diff != "" {
				t.Errorf("FailoverPods() first names mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBindingsRecordsFirstSightings(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		target      int
		sightings   []string // one a second from t0
		wantCount   int
		wantReached bool
		wantTimes   []time.Time
	}{
		{
			name:   "a pod seen bound twice counts once, at its first sighting",
			target: 3, sightings: []string{"a", "b", "a"},
			wantCount: 2, wantReached: false,
			wantTimes: []time.Time{t0, t0.Add(time.Second)},
		},
		{
			name:   "the target reached, then passed",
			target: 2, sightings: []string{"a", "b", "c"},
			wantCount: 3, wantReached: true,
			wantTimes: []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &bindings{at: map[string]time.Time{}, target: tt.target, reached: make(chan struct{})}
			for i, name := range tt.sightings {
				b.bound(name, t0.Add(time.Duration(i)*time.Second))
			}
			if got := b.count(); got != tt.wantCount {
				t.Errorf("count() = %d, want %d", got, tt.wantCount)
			}
			reached := false
			select {
			case <-b.reached:
				reached = true
			default:
			}
			if reached != tt.wantReached {
				t.Errorf("reached = %v, want %v", reached, tt.wantReached)
			}
			got := b.times()
			slices.SortFunc(got, func(a, b time.Time) int { return a.Compare(b) })
			if diff := cmp.Diff(tt.wantTimes, got); diff != "" {
				t.Errorf("times() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
