package judge

// fewNodes is a map from a few node names (a pod's peers' nodes: a handful)
// that is asked about every candidate node (thousands). Most candidates are
// not in it, and a Go map, even a small one, hashes and compares every
// candidate, which is the largest part of filter's and prioritize's work
// over thousands of candidates after decoding. A 64-bit Bloom filter of a
// cheap fingerprint answers "no" for most candidates at a fraction of that;
// the map answers the rest.
type fewNodes[V any] struct {
	m     map[string]V
	bloom uint64
}

func newFewNodes[V any](m map[string]V) fewNodes[V] {
	f := fewNodes[V]{m: m}
	for name := range m {
		f.bloom |= fingerprintBit(name)
	}
	return f
}

// get returns the value of name, if it is a key.
func (f *fewNodes[V]) get(name string) (V, bool) {
	if f.bloom&fingerprintBit(name) == 0 {
		var zero V
		return zero, false
	}
	v, ok := f.m[name]
	return v, ok
}

// fingerprintBit picks one of 64 bits for a node name from all its bytes,
// 8 at a time, each step multiplied so that every byte reaches the top bits
// the bit is taken from. All bytes, not a few words: node names often share
// long prefixes ("gke-prod-pool-") and suffixes (".compute.internal") and
// vary anywhere between. A weak fingerprint would only cost speed, never
// correctness: the map decides whenever the bit is set.
func fingerprintBit(s string) uint64 {
	const k1, k2 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F
	n := len(s)
	h := uint64(n) * k2
	if n < 8 {
		for i := range n {
			h = (h ^ uint64(s[i])) * k1
		}
	} else {
		for i := 0; i+8 < n; i += 8 {
			h = (h ^ word(s, i)) * k1
		}
		h = (h ^ word(s, n-8)) * k2 // the last 8, overlapping the loop's last word
	}
	return 1 << (h >> 58)
}

// word reads 8 bytes of s from i, little-endian (one load once compiled).
func word(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
