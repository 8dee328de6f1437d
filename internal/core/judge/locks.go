package judge

import (
	"hash/maphash"
	"slices"
	"sync"
)

// groupLocks serialises the placings that recheck (the extender's bind) within a peer group while letting
// unrelated groups proceed in parallel. Keys hash onto a fixed set of
// stripes; a caller locks its stripes in ascending order, so two callers
// never wait for each other in a cycle.
type groupLocks struct {
	seed    maphash.Seed
	stripes [64]sync.Mutex
}

func newGroupLocks() *groupLocks { return &groupLocks{seed: maphash.MakeSeed()} }

// lock takes the stripes of keys and returns the function that releases them.
func (l *groupLocks) lock(keys []string) (unlock func()) {
	idx := make([]int, 0, len(keys))
	for _, k := range keys {
		idx = append(idx, int(maphash.String(l.seed, k)%uint64(len(l.stripes))))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		l.stripes[i].Lock()
	}
	return func() {
		for _, i := range slices.Backward(idx) {
			l.stripes[i].Unlock()
		}
	}
}
