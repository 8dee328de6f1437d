package decisionlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/regosched/regosched/internal/plumbing/redirects"
)

// Sink receives batches of encoded events, each one JSON object.
type Sink interface {
	// Write delivers the batch or returns why not; the logger counts the
	// batch's events as dropped on error, since it keeps no backlog.
	Write(ctx context.Context, batch [][]byte) error
	Close() error
}

// WriterSink writes one JSON object per line to an io.Writer, e.g. stdout.
type WriterSink struct {
	mu sync.Mutex // one batch at a time, so lines never interleave
	w  io.Writer
}

// NewWriterSink returns a sink writing to w; it does not close w.
func NewWriterSink(w io.Writer) *WriterSink { return &WriterSink{w: w} }

// Write writes each event followed by a newline, buffered so a batch costs few syscalls.
func (s *WriterSink) Write(_ context.Context, batch [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	bw := bufio.NewWriter(s.w)
	for _, e := range batch {
		if _, err := bw.Write(e); err != nil {
			return fmt.Errorf("decisionlog: write event: %w", err)
		}
		if err := bw.WriteByte('\n'); err != nil {
			return fmt.Errorf("decisionlog: write event: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("decisionlog: write events: %w", err)
	}
	return nil
}

// Close does nothing: the writer belongs to the caller.
func (s *WriterSink) Close() error { return nil }

// FileSink appends one JSON object per line to a file.
type FileSink struct {
	WriterSink
	f *os.File
}

// NewFileSink opens path for appending, creating it with mode 0600 since
// decisions name pods and their labels.
func NewFileSink(path string) (*FileSink, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("decisionlog: open log file: %w", err)
	}
	return &FileSink{WriterSink: WriterSink{w: f}, f: f}, nil
}

// Close closes the file.
func (s *FileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("decisionlog: close log file: %w", err)
	}
	return nil
}

// HTTPConfig configures an HTTPSink.
type HTTPConfig struct {
	// URL is the service's base URL; events are POSTed to URL + "/logs", as OPA does.
	URL string
	// Client defaults to a client with a 30 s timeout. One with no
	// CheckRedirect of its own follows redirects only within the URL's
	// scheme and host (redirects.SameOrigin), as it sends the bearer token.
	Client *http.Client
	// UploadSizeLimitBytes bounds each request's uncompressed JSON array, so
	// that the gzip'd body stays under it too; default 32768, OPA's default.
	UploadSizeLimitBytes int
	// MaxRetries is how many times a failed upload is retried; 0 means the
	// default 5 and a negative value means no retry.
	MaxRetries int
	// MinRetryDelay and MaxRetryDelay bound the exponential backoff between
	// retries; defaults 100 ms (OPA's) and 10 s.
	MinRetryDelay, MaxRetryDelay time.Duration
	// BearerTokenFile, when set, is read at each upload so that a rotated
	// token is picked up, and sent as "Authorization: Bearer <token>".
	BearerTokenFile string
}

// Defaults of HTTPConfig.
const (
	DefaultUploadSizeLimitBytes = 32768
	DefaultMaxRetries           = 5
	DefaultMinRetryDelay        = 100 * time.Millisecond
	DefaultMaxRetryDelay        = 10 * time.Second
)

// ErrEventTooLarge is returned (wrapped) for an event larger than the upload limit.
var ErrEventTooLarge = errors.New("decisionlog: event larger than the upload size limit")

// HTTPSink speaks OPA's decision log API: POST <url>/logs of a gzip'd JSON array of events.
type HTTPSink struct {
	cfg HTTPConfig
	url string
}

// NewHTTPSink checks cfg and fills its defaults.
func NewHTTPSink(cfg HTTPConfig) (*HTTPSink, error) {
	if cfg.URL == "" {
		return nil, errors.New("decisionlog: HTTP sink needs a URL")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Client.CheckRedirect == nil {
		// Go's default follows https to http, and to other hosts, with the
		// Authorization header and the events; the caller's client is
		// copied rather than changed.
		c := *cfg.Client
		c.CheckRedirect = redirects.SameOrigin("decision log")
		cfg.Client = &c
	}
	if cfg.UploadSizeLimitBytes <= 0 {
		cfg.UploadSizeLimitBytes = DefaultUploadSizeLimitBytes
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	} else if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.MinRetryDelay <= 0 {
		cfg.MinRetryDelay = DefaultMinRetryDelay
	}
	if cfg.MaxRetryDelay < cfg.MinRetryDelay {
		cfg.MaxRetryDelay = max(DefaultMaxRetryDelay, cfg.MinRetryDelay)
	}
	return &HTTPSink{cfg: cfg, url: strings.TrimSuffix(cfg.URL, "/") + "/logs"}, nil
}

// Write splits the batch into uploads under the size limit and sends each,
// retrying with backoff. Events of failed uploads are lost: the joined
// *DropError values say how many and why, for the dropped counter.
func (s *HTTPSink) Write(ctx context.Context, batch [][]byte) error {
	var errs []error
	for len(batch) > 0 {
		n, size := 0, 2 // the array's brackets
		for n < len(batch) {
			add := len(batch[n])
			if n > 0 {
				add++ // comma
			}
			if size+add > s.cfg.UploadSizeLimitBytes {
				break
			}
			size += add
			n++
		}
		if n == 0 {
			errs = append(errs, &DropError{Events: 1, Reason: ReasonTooLarge,
				Err: fmt.Errorf("%w: %d bytes, limit %d", ErrEventTooLarge, len(batch[0]), s.cfg.UploadSizeLimitBytes)})
			batch = batch[1:]
			continue
		}
		if err := s.upload(ctx, batch[:n]); err != nil {
			errs = append(errs, &DropError{Events: n, Reason: ReasonUploadFailed, Err: err})
		}
		batch = batch[n:]
	}
	return errors.Join(errs...)
}

func (s *HTTPSink) upload(ctx context.Context, events [][]byte) error {
	body, err := gzipArray(events)
	if err != nil {
		return err
	}
	delay := s.cfg.MinRetryDelay
	var lastErr error
	for attempt := 0; attempt <= s.cfg.MaxRetries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("decisionlog: upload abandoned after %d attempts: %w (last: %w)", attempt, ctx.Err(), lastErr)
			case <-t.C:
			}
			delay = min(delay*2, s.cfg.MaxRetryDelay)
		}
		if lastErr = s.post(ctx, body); lastErr == nil {
			return nil
		}
	}
	return fmt.Errorf("decisionlog: upload failed after %d attempts: %w", s.cfg.MaxRetries+1, lastErr)
}

func (s *HTTPSink) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("decisionlog: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	if s.cfg.BearerTokenFile != "" {
		tok, err := os.ReadFile(s.cfg.BearerTokenFile)
		if err != nil {
			return fmt.Errorf("decisionlog: read bearer token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("decisionlog: POST %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	// Drained so that the connection is reused; the body says nothing we need.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("decisionlog: POST %s: %s", s.url, resp.Status)
	}
	return nil
}

// Close does nothing: the client's idle connections close on their own.
func (s *HTTPSink) Close() error { return nil }

func gzipArray(events [][]byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	var err error
	write := func(p []byte) {
		if err == nil {
			_, err = zw.Write(p)
		}
	}
	write([]byte{'['})
	for i, e := range events {
		if i > 0 {
			write([]byte{','})
		}
		write(e)
	}
	write([]byte{']'})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("decisionlog: gzip events: %w", err)
	}
	return buf.Bytes(), nil
}

// DropError reports events a sink could not deliver, with the reason the
// dropped counter is labelled with.
type DropError struct {
	Events int
	Reason string
	Err    error
}

func (e *DropError) Error() string {
	return fmt.Sprintf("%d events dropped (%s): %v", e.Events, e.Reason, e.Err)
}

func (e *DropError) Unwrap() error { return e.Err }
