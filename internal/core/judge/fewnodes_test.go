package judge

import (
	"fmt"
	"testing"
)

// nodeNames gives n names of a cloud's naming scheme.
func nodeNames(scheme string, n int) []string {
	names := make([]string, n)
	for i := range names {
		switch scheme {
		case "kind":
			names[i] = fmt.Sprintf("node-%05d", i)
		case "eks": // a shared prefix and a long shared suffix
			names[i] = fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/256, i%256)
		case "gke": // a long shared prefix
			names[i] = fmt.Sprintf("gke-prod-default-pool-3f1b2c4d-%04x", i)
		case "short":
			names[i] = fmt.Sprint(i)
		}
	}
	return names
}

func TestFewNodes(t *testing.T) {
	for _, scheme := range []string{"kind", "eks", "gke", "short"} {
		t.Run(scheme, func(t *testing.T) {
			names := nodeNames(scheme, 5000)
			members := map[string]int{names[0]: 1, names[42]: 2, names[2500]: 3, names[4999]: 4, "": 5, "ünïcode-ñode": 6}
			few := newFewNodes(members)
			passed := 0 // non-members the fingerprint let through to the map
			for _, name := range append(names, "", "ünïcode-ñode", "ünïcode-ñodf", "12345678", "1234567") {
				want, wantOK := members[name]
				got, ok := few.get(name)
				if got != want || ok != wantOK {
					t.Errorf("get(%q) = %d, %v; want %d, %v", name, got, ok, want, wantOK)
				}
				if !wantOK && few.bloom&fingerprintBit(name) != 0 {
					passed++
				}
			}
			// Six members set at most six of 64 bits: about 10% of the
			// others should reach the map. A fingerprint blind to this
			// scheme would pass them all and be no faster than the map.
			if limit := len(names) / 5; passed > limit {
				t.Errorf("%d of %d non-members reached the map, want at most %d", passed, len(names), limit)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		var few fewNodes[float64]
		if v, ok := few.get("node-1"); ok || v != 0 {
			t.Errorf("get on the zero fewNodes = %v, %v; want 0, false", v, ok)
		}
	})
}

// BenchmarkFewNodes: the look-up of 5,000 candidates among three peers'
// nodes, against the plain map it replaces.
func BenchmarkFewNodes(b *testing.B) {
	for _, scheme := range []string{"kind", "eks"} {
		names := nodeNames(scheme, 5000)
		members := map[string]float64{names[42]: 1, names[1000]: 2, names[4321]: 3}
		few := newFewNodes(members)
		b.Run(scheme+"/map", func(b *testing.B) {
			var total float64
			for b.Loop() {
				for _, name := range names {
					total += members[name]
				}
			}
		})
		b.Run(scheme+"/fewNodes", func(b *testing.B) {
			var total float64
			for b.Loop() {
				for _, name := range names {
					v, _ := few.get(name)
					total += v
				}
			}
		})
	}
}
