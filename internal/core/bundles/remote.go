package bundles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/plumbing/redirects"
)

// IsRemote reports whether a --policy names a bundle server rather than a
// path.
func IsRemote(source string) bool {
	return strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://")
}

// Remote polls an OPA bundle server for a bundle, with OPA's own downloader:
// ETag / If-None-Match (a 304 is no change), jittered polling between
// MinDelay and MaxDelay, long polling when the server supports it. Each new
// bundle passes the same checks as a file (Options, then Compile's smoke
// test) before it replaces the active policy; a rejected one never does.
type Remote struct {
	// URL is the bundle's http(s) address.
	URL string
	// MinDelay and MaxDelay bound the wait between polls (whole seconds,
	// as in OPA's polling configuration).
	MinDelay, MaxDelay time.Duration
	// LongPollingTimeout, when positive, asks the server to hold a poll
	// open until the bundle changes, at most this long.
	LongPollingTimeout time.Duration
	// BearerTokenFile, when set, is read at every request and sent as
	// "Authorization: Bearer <token>".
	BearerTokenFile string
	// CACertFile, when set, is a PEM file of the certificate authorities
	// the server's certificate must chain to, instead of the system's: a
	// bundle server inside the cluster often has a private CA.
	CACertFile string
	// Insecure allows a plain http:// URL with a bearer token or without a
	// verification key: anyone on the path could then read the token or
	// replace the bundle.
	Insecure bool
	Options  Options
	Active   *Active
	// Activate, when set, makes each new policy active (see Watcher.Activate).
	Activate func(ctx context.Context, p *policy.Policy, store func())
	Log      logrus.FieldLogger

	client rest.Client
	path   string
	// etag is that of the active bundle.
	etag string
	// current is the digest of the active bundle, failed that of the last
	// rejected one or the text of the last download error: neither is
	// tried or reported twice in a row.
	current, failed string
}

// First downloads the bundle until it gets one that passes every check, and
// returns its policy. A bundle that arrives but fails a check is an error at
// once; a server that cannot be reached or answers an error status is
// retried until timeout.
func (r *Remote) First(ctx context.Context, timeout time.Duration) (*policy.Policy, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var got *policy.Policy
	var rejected error
	d := r.downloader(plugins.TriggerManual).WithCallback(func(ctx context.Context, u download.Update) error {
		if u.Error != nil {
			return nil // Trigger returns it
		}
		if u.Bundle == nil {
			return errEmpty
		}
		p, err := r.Options.compile(ctx, u.Bundle)
		if err != nil {
			rejected = err
			return err
		}
		got, r.etag, r.current = p, u.ETag, digest(u.Bundle)
		return nil
	})
	var last error
	for delay := 250 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		err := d.Trigger(ctx)
		if ctx.Err() != nil {
			// A download cut short by the deadline may still be running:
			// read nothing it writes.
			if last == nil {
				return nil, fmt.Errorf("no policy bundle from %s within %s", r.URL, timeout)
			}
			return nil, fmt.Errorf("no policy bundle from %s within %s (last error: %w)", r.URL, timeout, last)
		}
		switch {
		case err == nil && got != nil:
			return got, nil
		case rejected != nil:
			return nil, fmt.Errorf("policy bundle from %s: %w", r.URL, rejected)
		case !retryable(err):
			return nil, fmt.Errorf("policy bundle from %s: %w", r.URL, err)
		}
		last = err
		r.Log.WithError(err).WithField("url", r.URL).Warn("policy bundle server not answering yet; retrying")
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

var errEmpty = errors.New("the server sent an empty body, not a bundle")

// retryable tells a server not reachable yet, or not serving yet, from a
// bundle that arrived and is wrong.
func retryable(err error) bool {
	if errors.Is(err, redirects.ErrRefused) { // no retry changes it
		return false // a *url.Error, hence a net.Error, but no retry changes it
	}
	var netErr net.Error
	var httpErr download.HTTPError
	return errors.As(err, &netErr) || errors.As(err, &httpErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errEmpty)
}

// Run polls until ctx ends. It must follow a successful First.
func (r *Remote) Run(ctx context.Context) {
	d := r.downloader(plugins.TriggerPeriodic).WithCallback(r.update)
	d.SetCache(r.etag) // the bundle First got is not downloaded again
	d.Start(ctx)
	<-ctx.Done()
	d.Stop(context.Background())
}

// update handles one poll. It always returns nil: the downloader would take
// an error for a failed download and retry at once, while a rejected bundle
// is only worth trying again once the server has a new one.
func (r *Remote) update(ctx context.Context, u download.Update) error {
	switch {
	case u.Error != nil:
		// The downloader retries with a backoff; report each distinct
		// failure once.
		if key := "error: " + u.Error.Error(); key != r.failed {
			r.failed = key
			reject(r.Active, fmt.Errorf("downloading policy bundle from %s: %w", r.URL, u.Error), r.Log)
		}
	case u.Bundle == nil:
		// 304 Not Modified (or an empty body): no change. A 304 for the
		// active bundle's ETag after a failure means the server is back
		// to it. (OPA's client keeps sending the last ETag it saw even
		// after a failed download, so a server back to the active bundle
		// answers 304, not the bundle.)
		if u.ETag != "" && u.ETag == r.etag {
			r.recovered()
		}
	default:
		d := digest(u.Bundle)
		switch d {
		case r.current:
			// The active bundle again (a server without ETags, or back to
			// it after a failure): nothing to swap.
			r.etag = u.ETag
			r.recovered()
			return nil
		case r.failed:
			return nil
		}
		p, err := r.Options.compile(ctx, u.Bundle)
		if err != nil {
			r.failed = d
			reject(r.Active, fmt.Errorf("policy bundle from %s: %w", r.URL, err), r.Log)
			return nil
		}
		r.current, r.failed, r.etag = d, "", u.ETag
		activate(ctx, r.Active, p, r.Activate, r.Log)
	}
	return nil
}

// recovered clears the last failure once the server serves the active
// bundle again: the error no longer describes the source. Storing the active
// policy again is what clears it; nothing is swapped or re-indexed.
func (r *Remote) recovered() {
	if r.failed == "" {
		return
	}
	r.failed = ""
	r.Active.Store(r.Active.Load())
	r.Log.WithField("revision", r.Active.Status().Revision).Info("policy bundle server serves the active bundle again")
}
