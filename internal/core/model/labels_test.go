package model

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLabels(t *testing.T) {
	long := strings.Repeat("v", 300) // a two-byte length
	tests := []struct {
		name string
		in   map[string]string
		want string // String()
	}{
		{"nil", nil, ""},
		{"empty", map[string]string{}, ""},
		{"empty value", map[string]string{"tier": ""}, "tier="},
		{"sorted by key", map[string]string{"b": "2", "a": "1", "app.kubernetes.io/name": "redis"}, "a=1,app.kubernetes.io/name=redis,b=2"},
		{"long value", map[string]string{"k": long}, "k=" + long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLabels(tt.in)
			if got := l.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			want := tt.in
			if len(want) == 0 {
				want = nil
			}
			if diff := cmp.Diff(want, l.Map()); diff != "" {
				t.Errorf("Map() mismatch (-want +got):\n%s", diff)
			}
			if got := l.Len(); got != len(tt.in) {
				t.Errorf("Len() = %d, want %d", got, len(tt.in))
			}
			for k, v := range tt.in {
				if got, ok := l.Get(k); !ok || got != v {
					t.Errorf("Get(%q) = %q, %v; want %q, true", k, got, ok, v)
				}
			}
			for _, absent := range []string{"", "0", "aa", "zz"} {
				if _, in := tt.in[absent]; in {
					continue
				}
				if got, ok := l.Get(absent); ok {
					t.Errorf("Get(%q) = %q, true; want absent", absent, got)
				}
			}
			if !l.Equal(NewLabels(maps.Clone(tt.in))) {
				t.Error("labels packed twice from the same map differ")
			}
		})
	}
}

func TestLabelsEquality(t *testing.T) {
	a := NewLabels(map[string]string{"a": "1", "b": "2"})
	for _, other := range []map[string]string{
		{"a": "1"},
		{"a": "1", "b": "3"},
		{"a": "1", "b": "2", "c": ""},
		{"a1": "", "b": "2"}, // the same bytes, split differently
	} {
		if o := NewLabels(other); a == o || a.Equal(o) {
			t.Errorf("%v equals %v", a, o)
		}
	}
	if (Labels{}) != NewLabels(nil) || (Labels{}) != NewLabels(map[string]string{}) {
		t.Error("no labels are not the zero value")
	}
}

// TestLabelsOneAllocation: the cache keeps one pointer-free object per pod's
// labels, and reading them allocates nothing.
func TestLabelsOneAllocation(t *testing.T) {
	m := map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/component": "master"}
	var l Labels
	if n := testing.AllocsPerRun(100, func() { l = NewLabels(m) }); n != 3 {
		// The packing kept, and two short-lived: the sorted keys and the buffer.
		t.Errorf("NewLabels() = %v allocations, want 3", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		for range l.All() {
		}
		_, _ = l.Get("app.kubernetes.io/name")
	}); n != 0 {
		t.Errorf("All() and Get() = %v allocations, want 0", n)
	}
}
