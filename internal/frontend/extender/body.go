package extender

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// maxPooledBody is the largest buffer kept for reuse: enough for the node
// names of any cluster, while a rare multi-megabyte body of full Node
// objects is left to the garbage collector.
const maxPooledBody = 4 << 20

// maxPrealloc bounds what is allocated ahead of the bytes arriving: a
// Content-Length is the caller's claim, and idle connections each claiming
// the body limit must not each cost that much heap.
const maxPrealloc = 1 << 20

// bodyBuffers recycles the buffers request bodies are read into. Reading a
// body whole with io.ReadAll grows a fresh buffer by doubling, a third of
// the bytes a filter call allocated; a recycled buffer of the right size
// costs nothing. Reuse is safe because goccy/go-json copies its input
// before decoding: nothing decoded points into the buffer.
type bodyBuffers struct {
	pool sync.Pool // of *bytes.Buffer
}

// decode reads body whole (size is its Content-Length, -1 if unknown; limit
// the most that will be read) into a recycled buffer and decodes it.
func decode[A any](b *bodyBuffers, body io.Reader, size, limit int64, decode func([]byte) (*A, error)) (*A, error) {
	buf, _ := b.pool.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			b.pool.Put(buf)
		}
	}()
	if size > 0 && size <= limit {
		// One allocation at most for a body of up to maxPrealloc; ReadFrom
		// wants MinRead bytes free to see EOF. Larger bodies grow as they come.
		buf.Grow(int(min(size, maxPrealloc)) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(body); err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return nil, err
		}
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	return decode(buf.Bytes())
}

// recycled keeps slices of E between requests: the slice the candidates'
// NodeNames decode into, one string header per candidate node of every
// filter and prioritize request, and the list prioritize answers with, one
// entry per scored candidate. Decoding into a slice with room writes the
// names in place (goccy/go-json, like encoding/json, appends to the slice
// it is given); without room it decodes into a scratch buffer and copies
// from there into a new slice.
type recycled[E any] struct {
	pool sync.Pool // of *[]E
}

// maxPooledSlice bounds the slices kept: more candidates than any cluster
// has nodes would be an outlier not worth keeping.
const maxPooledSlice = 16384

// get returns an empty slice with room, or nil when none was recycled.
func (l *recycled[E]) get() []E {
	if p, ok := l.pool.Get().(*[]E); ok {
		return *p
	}
	return nil
}

// put recycles s, which nothing may read afterwards.
func (l *recycled[E]) put(s []E) {
	if c := cap(s); c > 0 && c <= maxPooledSlice {
		// Cleared to len: a kept element would keep the last request's
		// decoded strings alive. Callers pass the whole written length.
		clear(s)
		s = s[:0]
		l.pool.Put(&s)
	}
}
