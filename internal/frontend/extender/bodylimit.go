package extender

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/semaphore"
)

// errBodyTimeout says a request body did not arrive within BodyReadTimeout.
var errBodyTimeout = errors.New("request body not read in time")

// bodyChunk is the most a body read charges the byte budget ahead of the
// bytes arriving.
const bodyChunk = 64 << 10

// limitedBody reads a request body within its size limit, its read
// deadline and the handler's byte budget, which it charges as bytes
// arrive and gives back on release.
type limitedBody struct {
	r       io.Reader
	rc      *http.ResponseController
	budget  *semaphore.Weighted
	ctx     context.Context
	cancel  context.CancelFunc
	timeout time.Duration
	held    int64
}

// limitBody returns r's body bounded in size (MaxBodyBytes), in time
// (BodyReadTimeout, also set as the connection's read deadline so that a
// stalled read returns) and in the bytes all bodies hold together.
func (h *handler) limitBody(w http.ResponseWriter, r *http.Request) *limitedBody {
	deadline := time.Now().Add(h.cfg.BodyReadTimeout)
	rc := http.NewResponseController(w)
	// Not supported by every ResponseWriter (a test recorder): the
	// context's deadline still bounds waiting for the budget.
	_ = rc.SetReadDeadline(deadline)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	return &limitedBody{
		r: http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes), rc: rc, budget: h.reading,
		ctx: ctx, cancel: cancel, timeout: h.cfg.BodyReadTimeout,
	}
}

// read ends the body's deadline once it is read: the server's background
// read, which watches for the caller leaving, would otherwise take the
// deadline passing during the decision for the caller leaving, and cancel
// the request.
func (b *limitedBody) read() {
	_ = b.rc.SetReadDeadline(time.Time{})
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if len(p) > bodyChunk {
		p = p[:bodyChunk]
	}
	want := int64(len(p))
	if err := b.budget.Acquire(b.ctx, want); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("%w within %v (waiting for memory other bodies hold)", errBodyTimeout, b.timeout)
		}
		return 0, fmt.Errorf("reading the request body: %w", err)
	}
	n, err := b.r.Read(p)
	b.held += int64(n)
	b.budget.Release(want - int64(n))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, fmt.Errorf("%w within %v", errBodyTimeout, b.timeout)
	}
	return n, err
}

// release gives back the bytes charged: once the request is answered, its
// body and what was decoded from it are no longer held.
func (b *limitedBody) release() {
	b.cancel()
	b.budget.Release(b.held)
	b.held = 0
}
