package model

import (
	"slices"
	"strings"

	"github.com/regosched/regosched/internal/plumbing/packed"
)

// Origin identifies the compiled policy that described a pod. Claims are
// compared by it rather than by revision: two bundles may share a revision
// and still read labels differently.
type Origin struct {
	// Revision names the policy, for logs.
	Revision string
}

// Mark is one thing a pod is to its peers: an opaque token, and the
// description that names the pod in a denial ({pod} stands for its
// namespace/name).
type Mark struct {
	Token, What string
}

// Avoid is an entry of separate or spread: the pod avoids every peer that
// holds Mark in one domain of TopologyKey (HostnameKey unless a separate
// entry names another). Weight is for spread only.
type Avoid struct {
	Mark, Rule  string
	TopologyKey string
	Weight      float64
}

// Cap is an entry of cap: of the pods holding Mark (the pod among them), a
// domain of TopologyKey may hold at most Max; or, with Quorum, fewer than
// half of the group's members, so that the group keeps a majority through
// the loss of any one domain. The group's size is the largest of Size (as
// the policy states it, 0 if it does not), the members counted, and, with
// SizeFromStatefulSets (where a StatefulSet holds members only, as an
// Elasticsearch master nodeSet does, not a Redis Cluster's masters and
// replicas alike), the replicas of their StatefulSets.
type Cap struct {
	Mark, Rule, TopologyKey string
	Max                     int
	Quorum                  bool
	Size                    int
	SizeFromStatefulSets    bool
}

// Parts says which parts of the claims rule were evaluated for a pod: a
// bound pod is described for its marks only, a pending pod for what it
// avoids only.
type Parts uint8

// The parts of the claims rule.
const (
	MarksPart Parts = 1 << iota
	AvoidsPart
	AllParts = MarksPart | AvoidsPart
)

// Claims is what the claims rule answered for one pod, under the policy
// Origin. Values are never modified after New, so they may be shared
// between goroutines.
//
// Marks are packed into one string: one allocation without pointers, which
// the garbage collector does not scan, since the cache keeps the marks of
// every bound pod. A pod's tokens share long prefixes (its workload,
// cluster and scope) and its marks come in pairs with one description (its
// role and "*"), so tokens are front-coded and a repeated description is
// one byte.
type Claims struct {
	origin *Origin
	parts  Parts
	// marks holds the marks in the order of their tokens, each as
	//
	//	uvarint(shared) uvarint(len(suffix)) suffix description
	//
	// where the token is the previous token's first shared bytes then
	// suffix, and the description is uvarint(len<<1) then its bytes, or
	// uvarint(sameWhat) for the previous entry's description. Readers take
	// a cut-short or corrupt packing for the end of the marks.
	marks            string
	separate, spread []Avoid
	caps             []Cap
}

// NewClaims returns the claims of a pod under origin, of which parts were
// evaluated. marks' tokens must be distinct; New sorts marks.
func NewClaims(origin *Origin, parts Parts, marks []Mark, separate, spread []Avoid, caps []Cap) *Claims {
	return &Claims{origin: origin, parts: parts, marks: packMarks(marks), separate: separate, spread: spread, caps: caps}
}

// Origin is the policy that described the pod.
func (c *Claims) Origin() *Origin { return c.origin }

// Has reports whether parts were evaluated for the pod.
func (c *Claims) Has(parts Parts) bool { return c.parts&parts == parts }

// Separate is what the pod keeps off its node (hard).
func (c *Claims) Separate() []Avoid { return c.separate }

// Spread is what the pod prefers away from its topology domains (soft).
func (c *Claims) Spread() []Avoid { return c.spread }

// Caps are the domains' limits on the pod's groups (hard).
func (c *Claims) Caps() []Cap { return c.caps }

// Avoids reports whether the pod avoids any peer.
func (c *Claims) Avoids() bool { return len(c.separate) > 0 || len(c.spread) > 0 || len(c.caps) > 0 }

// Same reports whether c and o are claims of one policy saying the same: a
// relabelled pod whose claims are the same needs no new audit.
func (c *Claims) Same(o *Claims) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.origin == o.origin && c.parts == o.parts && c.marks == o.marks &&
		slices.Equal(c.separate, o.separate) && slices.Equal(c.spread, o.spread) && slices.Equal(c.caps, o.caps)
}

// sameWhat, as a description's length field, stands for the previous
// entry's description; a new description's field is its length<<1.
const sameWhat = 1

// packMarks sorts ms, whose tokens are distinct, and packs them.
func packMarks(ms []Mark) string {
	slices.SortFunc(ms, func(a, b Mark) int { return strings.Compare(a.Token, b.Token) })
	var b []byte
	var prev Mark
	for i, m := range ms {
		shared := commonPrefix(prev.Token, m.Token)
		b = packed.AppendUvarint(b, uint64(shared))
		b = packed.AppendString(b, m.Token[shared:])
		if i > 0 && m.What == prev.What {
			b = packed.AppendUvarint(b, sameWhat)
		} else {
			b = append(packed.AppendUvarint(b, uint64(len(m.What))<<1), m.What...)
		}
		prev = m
	}
	return string(b)
}

// commonPrefix returns the length of the prefix a and b share.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// markReader reads packed marks entry by entry, without copying.
type markReader struct {
	rest     string
	read     bool   // whether an entry was read
	tokenLen int    // length of the last token read
	what     string // description of the last entry read
}

// next reads the next entry, whose token is the last token's first shared
// bytes then suffix, and whose description is then r.what. ok is false at
// the end of the marks, or where the packing is cut short or corrupt.
func (r *markReader) next() (shared int, suffix string, ok bool) {
	n, rest, ok := packed.Uvarint(r.rest)
	if !ok || n > uint64(r.tokenLen) {
		return 0, "", false
	}
	if suffix, rest, ok = packed.Next(rest); !ok {
		return 0, "", false
	}
	w, rest, ok := packed.Uvarint(rest)
	switch {
	case !ok || w&1 == 1 && (w != sameWhat || !r.read):
		return 0, "", false // no previous description to repeat, or no such field
	case w&1 == 0:
		if w>>1 > uint64(len(rest)) {
			return 0, "", false
		}
		r.what, rest = rest[:w>>1], rest[w>>1:]
	}
	r.rest, r.read, r.tokenLen = rest, true, int(n)+len(suffix)
	return int(n), suffix, true
}

// EachMark calls f with the token and description of every mark, in the
// order of their tokens, until f returns false.
func (c *Claims) EachMark(f func(token, what string) bool) {
	r := markReader{rest: c.marks}
	var token []byte
	for {
		shared, suffix, ok := r.next()
		if !ok {
			return
		}
		token = append(token[:shared], suffix...)
		if !f(string(token), r.what) {
			return
		}
	}
}

// What returns the description of token among the marks. It runs for every
// peer and entry of a join, so it matches token against the front-coded
// entries as they come, without rebuilding theirs, and does not allocate.
func (c *Claims) What(token string) (what string, found bool) {
	r := markReader{rest: c.marks}
	m := 0 // length of the prefix token shares with the last token read
	for {
		shared, suffix, ok := r.next()
		switch {
		case !ok:
			return "", false
		case shared < m:
			// It differs from the last token where token does not, so it
			// sorts after token, and so do the rest.
			return "", false
		case shared > m:
			continue // it differs from token where the last token did
		}
		k := commonPrefix(suffix, token[m:])
		m += k
		if k == len(suffix) {
			if m == len(token) {
				return r.what, true
			}
		} else if m == len(token) || suffix[k] > token[m] {
			return "", false // past token
		}
	}
}
