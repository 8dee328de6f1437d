package model

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// defaultMarks are the marks the default policy gives a Redis master.
var defaultMarks = map[string]string{
	"redis/ns/cluster-0/cluster/cluster-0/*":      "redis: master {pod} of cluster cluster-0 already on this node",
	"redis/ns/cluster-0/cluster/cluster-0/master": "redis: master {pod} of cluster cluster-0 already on this node",
	"redis/ns/cluster-0/shard/0/*":                "redis: master {pod} of cluster cluster-0 (shard 0) already on this node",
	"redis/ns/cluster-0/shard/0/master":           "redis: master {pod} of cluster cluster-0 (shard 0) already on this node",
}

// withMarks is claims whose marks are marks, as a policy would give them.
func withMarks(marks map[string]string) *Claims {
	return NewClaims(&Origin{}, MarksPart, sortedMarks(marks), nil, nil, nil)
}

// sortedMarks lists marks in the order of their tokens.
func sortedMarks(marks map[string]string) []Mark {
	var out []Mark
	for _, token := range slices.Sorted(maps.Keys(marks)) {
		out = append(out, Mark{token, marks[token]})
	}
	return out
}

// marksOf lists the marks of c as EachMark reads them.
func marksOf(c *Claims) []Mark {
	var out []Mark
	c.EachMark(func(token, what string) bool { out = append(out, Mark{token, what}); return true })
	return out
}

// TestPackedMarks: marks read back as written, in the order of their
// tokens, whatever their length; What finds exactly those; a truncated
// packing ends the marks early instead of panicking.
func TestPackedMarks(t *testing.T) {
	// The layout: "ab" is "a" and "b", with the description before it.
	layout := withMarks(map[string]string{"b": "y", "ab": "x", "a": "x"})
	if want := "\x00\x01a\x02x" + "\x01\x01b\x01" + "\x00\x01b\x02y"; layout.marks != want {
		t.Errorf("packed marks = %q, want %q", layout.marks, want)
	}
	long := strings.Repeat("x", 300) // two-byte lengths
	for _, tt := range []struct {
		name  string
		marks map[string]string
	}{
		{"none", map[string]string{}},
		{"empty token and description", map[string]string{"": "", "a": "", "b": "{pod} is b"}},
		{"default policy", defaultMarks},
		{"descriptions repeated only when consecutive", map[string]string{"a/1": "one", "a/2": "two", "a/3": "one", "b": "one"}},
		{"tokens prefixes of others", map[string]string{"a": "x", "ab": "x", "abc": "y", "abd": "y", "b": "y"}},
		{"tokens ends of others", map[string]string{"ab": "x", "b": "x", "bb": "y"}},
		{"two-byte lengths", map[string]string{long: long, long + "y": long, long + "z": "z", "y": long}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := withMarks(tt.marks)
			want := sortedMarks(tt.marks)
			if diff := cmp.Diff(want, marksOf(c)); diff != "" {
				t.Errorf("marks mismatch (-want +got):\n%s", diff)
			}
			// Every token, and strings about them: their prefixes, those
			// followed by bytes that sort before, among and after, and two
			// tokens end to end.
			var queries []string
			for token := range tt.marks {
				for i := range len(token) + 1 {
					queries = append(queries, token[:i], token[:i]+"\x00", token[:i]+"m", token[:i]+"\xff")
				}
				for other := range tt.marks {
					queries = append(queries, token+other)
				}
			}
			for _, q := range queries {
				wantWhat, wantOK := tt.marks[q]
				if what, ok := c.What(q); what != wantWhat || ok != wantOK {
					t.Errorf("What(%q) = %q, %v; want %q, %v", q, what, ok, wantWhat, wantOK)
				}
			}
			for i := range len(c.marks) {
				cut := &Claims{marks: c.marks[:i]}
				got := marksOf(cut)
				if len(got) >= len(want) || !slices.Equal(want[:len(got)], got) {
					t.Errorf("%d of %d bytes read as %d marks, want fewer, the first of %d", i, len(c.marks), len(got), len(want))
				}
				for _, m := range want {
					if what, ok := cut.What(m.Token); ok && what != m.What {
						t.Errorf("%d of %d bytes: What(%q) = %q, want %q or nothing", i, len(c.marks), m.Token, what, m.What)
					}
				}
			}
		})
	}
}

// TestNewSortsMarks: New takes marks in any order, as a Rego object gives
// them, and reads them back in the order of their tokens.
func TestNewSortsMarks(t *testing.T) {
	c := NewClaims(&Origin{}, MarksPart, []Mark{{"b", "2"}, {"c", "3"}, {"a", "1"}}, nil, nil, nil)
	if diff := cmp.Diff([]Mark{{"a", "1"}, {"b", "2"}, {"c", "3"}}, marksOf(c)); diff != "" {
		t.Errorf("marks mismatch (-want +got):\n%s", diff)
	}
}

// TestEachMarkStops: EachMark stops at the first mark f refuses.
func TestEachMarkStops(t *testing.T) {
	var seen []string
	withMarks(map[string]string{"a": "x", "b": "x", "c": "y"}).EachMark(func(token, _ string) bool {
		seen = append(seen, token)
		return token != "b"
	})
	if diff := cmp.Diff([]string{"a", "b"}, seen); diff != "" {
		t.Errorf("tokens seen mismatch (-want +got):\n%s", diff)
	}
}

// TestCorruptMarks: a packing Go did not write reads as the marks before
// the first entry that makes no sense.
func TestCorruptMarks(t *testing.T) {
	const a = "\x00\x01a\x02x" // token "a", description "x"
	for _, tt := range []struct {
		name, marks string
		want        []Mark
	}{
		{"shared longer than the previous token", a + "\x02\x01b\x01", []Mark{{"a", "x"}}},
		{"shared in the first entry", "\x01\x01a\x02x", nil},
		{"repeat in the first entry", "\x00\x01a\x01", nil},
		{"odd description field but repeat", a + "\x01\x01b\x03", []Mark{{"a", "x"}}},
		{"suffix past the end", "\x00\x05a\x02x", nil},
		{"description past the end", "\x00\x01a\x04x", nil},
		{"huge shared", a + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x01", []Mark{{"a", "x"}}},
		{"huge description length", "\x00\x01a\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01x", nil},
		{"varint of eleven bytes", strings.Repeat("\x80", 10) + "\x00", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Claims{marks: tt.marks}
			if diff := cmp.Diff(tt.want, marksOf(c)); diff != "" {
				t.Errorf("marks mismatch (-want +got):\n%s", diff)
			}
			for _, q := range []string{"", "a", "b"} {
				what, ok := c.What(q)
				want := slices.IndexFunc(tt.want, func(m Mark) bool { return m.Token == q })
				if ok != (want >= 0) || ok && what != tt.want[want].What {
					t.Errorf("What(%q) = %q, %v; want it found only among %v", q, what, ok, tt.want)
				}
			}
		})
	}
}

// TestWhatDoesNotAllocate: the join calls What for every peer and entry, so
// it must not allocate.
func TestWhatDoesNotAllocate(t *testing.T) {
	c := withMarks(defaultMarks)
	for _, token := range []string{"redis/ns/cluster-0/shard/0/master", "redis/ns/cluster-0/shard/0/replica"} {
		wantWhat, wantOK := defaultMarks[token]
		var what string
		var ok bool
		if n := testing.AllocsPerRun(100, func() { what, ok = c.What(token) }); n != 0 {
			t.Errorf("What(%q) allocates %v times, want 0", token, n)
		}
		if what != wantWhat || ok != wantOK {
			t.Errorf("What(%q) = %q, %v; want %q, %v", token, what, ok, wantWhat, wantOK)
		}
	}
}

// TestSame: claims are the same only when one policy said the same of the
// same parts, so that the cache re-audits a pod whenever any of it changed.
func TestSame(t *testing.T) {
	origin, other := &Origin{Revision: "r1"}, &Origin{Revision: "r1"}
	marks := []Mark{{"m", "{pod} is m"}}
	separate := []Avoid{{Mark: "m", Rule: "r"}}
	spread := []Avoid{{Mark: "m", Rule: "s", TopologyKey: "zone", Weight: 2}}
	base := NewClaims(origin, AllParts, slices.Clone(marks), separate, spread, nil)
	tests := []struct {
		name string
		a, b *Claims
		want bool
	}{
		{"both nil", nil, nil, true},
		{"nil and claims", nil, base, false},
		{"claims and nil", base, nil, false},
		{"itself", base, base, true},
		{"made again", base, NewClaims(origin, AllParts, slices.Clone(marks), slices.Clone(separate), slices.Clone(spread), nil), true},
		{"another policy of the same revision", base, NewClaims(other, AllParts, slices.Clone(marks), separate, spread, nil), false},
		{"other parts evaluated", base, NewClaims(origin, MarksPart, slices.Clone(marks), separate, spread, nil), false},
		{"another mark", base, NewClaims(origin, AllParts, []Mark{{"n", "{pod} is m"}}, separate, spread, nil), false},
		{"another description", base, NewClaims(origin, AllParts, []Mark{{"m", "{pod} is n"}}, separate, spread, nil), false},
		{"no marks", base, NewClaims(origin, AllParts, nil, separate, spread, nil), false},
		{"another separate rule", base, NewClaims(origin, AllParts, slices.Clone(marks), []Avoid{{Mark: "m", Rule: "q"}}, spread, nil), false},
		{"no separate", base, NewClaims(origin, AllParts, slices.Clone(marks), nil, spread, nil), false},
		{"another spread weight", base, NewClaims(origin, AllParts, slices.Clone(marks), separate, []Avoid{{Mark: "m", Rule: "s", TopologyKey: "zone", Weight: 1}}, nil), false},
		{"another spread key", base, NewClaims(origin, AllParts, slices.Clone(marks), separate, []Avoid{{Mark: "m", Rule: "s", TopologyKey: "node", Weight: 2}}, nil), false},
		{"no spread", base, NewClaims(origin, AllParts, slices.Clone(marks), separate, nil, nil), false},
		{"nil and empty separate", NewClaims(origin, AvoidsPart, nil, nil, nil, nil), NewClaims(origin, AvoidsPart, nil, []Avoid{}, nil, nil), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Same(tt.b); got != tt.want {
				t.Errorf("a.Same(b) = %v, want %v", got, tt.want)
			}
			if got := tt.b.Same(tt.a); got != tt.want {
				t.Errorf("b.Same(a) = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestParts: Has and Avoids say what was evaluated and whether the pod
// avoids anyone, for the policy's choice of view.
func TestParts(t *testing.T) {
	tests := []struct {
		name                 string
		c                    *Claims
		marks, avoids, avoid bool
	}{
		{"marks only", NewClaims(nil, MarksPart, nil, nil, nil, nil), true, false, false},
		{"avoids, none", NewClaims(nil, AvoidsPart, nil, nil, nil, nil), false, true, false},
		{"avoids, separate", NewClaims(nil, AvoidsPart, nil, []Avoid{{Mark: "m", Rule: "r"}}, nil, nil), false, true, true},
		{"all, spread", NewClaims(nil, AllParts, nil, nil, []Avoid{{Mark: "m", Rule: "r", TopologyKey: "k", Weight: 1}}, nil), true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []bool{tt.c.Has(MarksPart), tt.c.Has(AvoidsPart), tt.c.Has(AllParts), tt.c.Avoids()}
			want := []bool{tt.marks, tt.avoids, tt.marks && tt.avoids, tt.avoid}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("[Has(MarksPart) Has(AvoidsPart) Has(AllParts) Avoids()] mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
