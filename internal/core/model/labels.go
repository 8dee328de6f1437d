package model

import (
	"iter"
	"slices"
	"strings"

	"github.com/regosched/regosched/internal/plumbing/packed"
)

// Labels are a pod's labels, packed into one string sorted by key. The cache
// keeps the labels of every bound pod it indexes: as a map they were its
// largest part (a map's table plus a heap object per key and value, all
// scanned by the garbage collector), packed they are one pointer-free
// allocation. Equal label sets pack to equal values, so == compares them.
// The zero value has no labels.
type Labels struct {
	packed string
}

// NewLabels packs m.
func NewLabels(m map[string]string) Labels {
	if len(m) == 0 {
		return Labels{}
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 2 // one-byte lengths, the usual case
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	for _, k := range keys {
		b = packed.AppendString(packed.AppendString(b, k), m[k])
	}
	return Labels{packed: string(b)}
}

// All yields every label, sorted by key.
func (l Labels) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for s := l.packed; ; {
			k, rest, ok1 := packed.Next(s)
			v, rest, ok2 := packed.Next(rest)
			if !ok1 || !ok2 || !yield(k, v) {
				return
			}
			s = rest
		}
	}
}

// Get returns the value of key, and whether the pod has the label.
func (l Labels) Get(key string) (string, bool) {
	for k, v := range l.All() {
		if k == key {
			return v, true
		}
		if k > key {
			break // sorted: no later key matches
		}
	}
	return "", false
}

// Len is the number of labels.
func (l Labels) Len() int {
	n := 0
	for range l.All() {
		n++
	}
	return n
}

// Map returns the labels as a new map (nil when there are none).
func (l Labels) Map() map[string]string {
	if l.packed == "" {
		return nil
	}
	m := map[string]string{}
	for k, v := range l.All() {
		m[k] = v
	}
	return m
}

// Equal reports whether l and o hold the same labels (go-cmp uses it).
func (l Labels) Equal(o Labels) bool { return l.packed == o.packed }

// String shows the labels as k=v pairs, sorted by key, as kubectl does.
func (l Labels) String() string {
	var b strings.Builder
	for k, v := range l.All() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	return b.String()
}
