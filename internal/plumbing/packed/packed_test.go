package packed

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 300) // a two-byte length
	tests := []struct {
		name string
		in   []string
	}{
		{"none", nil},
		{"empty strings", []string{"", ""}},
		{"short and long", []string{"a", long, "bc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b []byte
			for _, s := range tt.in {
				b = AppendString(b, s)
			}
			var got []string
			for s := string(b); ; {
				str, rest, ok := Next(s)
				if !ok {
					if s != "" {
						t.Errorf("Next() stopped with %d bytes left", len(s))
					}
					break
				}
				got, s = append(got, str), rest
			}
			if diff := cmp.Diff(tt.in, got); diff != "" {
				t.Errorf("strings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTruncated: every cut of a packing reads as fewer strings, never a
// panic, and a length past the end is the end.
func TestTruncated(t *testing.T) {
	full := string(AppendString(AppendString(nil, strings.Repeat("y", 200)), "z"))
	for i := range len(full) {
		n := 0
		for s := full[:i]; ; n++ {
			_, rest, ok := Next(s)
			if !ok {
				break
			}
			s = rest
		}
		if n > 1 {
			t.Errorf("%d of %d bytes read as %d strings, want at most 1", i, len(full), n)
		}
	}
	for _, bad := range []string{"\x05abc", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "\x80"} {
		if _, _, ok := Next(bad); ok {
			t.Errorf("Next(%q) = ok, want the end", bad)
		}
	}
}

func TestUvarint(t *testing.T) {
	for _, n := range []uint64{0, 1, 127, 128, 300, 1 << 40} {
		got, rest, ok := Uvarint(string(AppendUvarint(nil, n)) + "!")
		if !ok || got != n || rest != "!" {
			t.Errorf("Uvarint(%d) = %d, %q, %v; want %d, \"!\", true", n, got, rest, ok, n)
		}
	}
}
