package bundles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/policy"
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
	if errors.Is(err, errRedirect) {
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

func (r *Remote) init() error {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("policy bundle URL %q: want http(s)://host/path", r.URL)
	}
	if u.Scheme == "http" && !r.Insecure {
		// Over plain http a man in the middle reads the token, or swaps an
		// unsigned bundle for its own.
		switch {
		case r.BearerTokenFile != "":
			return fmt.Errorf("policy bundle URL %q: plain http would send the bearer token in clear text: use https, or --policy-insecure to allow it", r.URL)
		case r.Options.Verification == nil:
			return fmt.Errorf("policy bundle URL %q: plain http lets anyone on the path replace an unsigned bundle: use https or --policy-verification-key, or --policy-insecure to allow it", r.URL)
		}
	}
	if r.MinDelay < time.Second || r.MaxDelay < r.MinDelay {
		return fmt.Errorf("policy polling delays: want 1s <= min (%s) <= max (%s)", r.MinDelay, r.MaxDelay)
	}
	if r.LongPollingTimeout < 0 {
		return fmt.Errorf("policy long polling timeout %s: want 0 (off) or more", r.LongPollingTimeout)
	}
	// The service is the server; the bundle's path (and query) is asked of it.
	// The plugin wraps the client OPA would build (plain, or sending the
	// bearer token) to bound every response body.
	creds := map[string]any{"plugin": limitPluginName}
	if r.BearerTokenFile != "" {
		creds["bearer"] = map[string]any{"token_path": r.BearerTokenFile}
	}
	cfg := map[string]any{"url": u.Scheme + "://" + u.Host, "credentials": creds}
	if r.CACertFile != "" {
		cfg["tls"] = map[string]any{"ca_cert": r.CACertFile}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("bundle server client: %w", err)
	}
	lookup := func(name string) rest.HTTPAuthPlugin {
		if name != limitPluginName {
			return nil
		}
		return &limitPlugin{opts: r.Options}
	}
	r.client, err = rest.New(raw, nil, rest.Logger(opaLogger{log: r.Log}), rest.AuthPluginLookup(lookup))
	if err != nil {
		return fmt.Errorf("bundle server client: %w", err)
	}
	r.path = u.RequestURI()
	return nil
}

func (r *Remote) downloader(trigger plugins.TriggerMode) *download.Downloader {
	minS, maxS := seconds(r.MinDelay), seconds(r.MaxDelay)
	cfg := download.Config{Trigger: &trigger, Polling: download.PollingConfig{MinDelaySeconds: &minS, MaxDelaySeconds: &maxS}}
	if r.LongPollingTimeout > 0 {
		lp := seconds(r.LongPollingTimeout)
		cfg.Polling.LongPollingTimeoutSeconds = &lp
	}
	// Checked in init: cannot fail here.
	_ = cfg.ValidateAndInjectDefaults()
	return download.New(cfg, r.client, r.path).WithBundleVerificationConfig(r.Options.Verification).
		WithSizeLimitBytes(r.Options.sizeLimit())
}

const limitPluginName = "regosched-size-limit"

// limitPlugin is the REST client's auth plugin: it builds the client OPA's
// own plugin for the configuration would (none, or bearer), with every
// response body bounded, since a gzip body is otherwise read to its end
// however long it is, every bundle checked against the limits as it
// streams, and redirects kept to the server's own scheme and host.
type limitPlugin struct {
	opts  Options
	inner rest.HTTPAuthPlugin
}

func (p *limitPlugin) NewClient(c rest.Config) (*http.Client, error) {
	c.Credentials.Plugin = nil
	inner, err := c.AuthPlugin(nil)
	if err != nil {
		return nil, fmt.Errorf("bundle server client: %w", err)
	}
	hc, err := inner.NewClient(c)
	if err != nil {
		return nil, fmt.Errorf("bundle server client: %w", err)
	}
	p.inner = inner
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = limitTransport{next: next, opts: p.opts}
	hc.CheckRedirect = checkRedirect
	return hc, nil
}

func (p *limitPlugin) Prepare(req *http.Request) error { return p.inner.Prepare(req) }

var errRedirect = errors.New("refused the redirect")

// checkRedirect follows a redirect only within the scheme and host (port
// included) of the first request: Go's client would follow https to http
// with the bearer token, and an unsigned bundle from there would be
// trusted as if it came over TLS.
func checkRedirect(req *http.Request, via []*http.Request) error {
	from, to := via[0].URL, req.URL
	var why string
	switch {
	case from.Scheme == "https" && to.Scheme != "https":
		why = "it goes from https to " + to.Scheme + ", in clear"
	case !strings.EqualFold(from.Host, to.Host):
		why = "it goes to another host or port than " + from.Host
	case len(via) >= 10:
		why = "it is the 10th in a row"
	default:
		return nil
	}
	return fmt.Errorf("%w of policy bundle %s to %s: %s", errRedirect, from.Redacted(), to.Redacted(), why)
}

// limitTransport bounds the body of every response to the size limit, and
// checks a bundle against the limits as OPA's loader reads it.
type limitTransport struct {
	next http.RoundTripper
	opts Options
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	limit := t.opts.sizeLimit()
	body := &limitedBody{ReadCloser: resp.Body, limit: limit, left: limit}
	if resp.StatusCode == http.StatusOK {
		// Only a 200 carries a bundle; OPA reads the body of an error
		// status only to log it.
		resp.Body = checkedBody{checked: newChecked(body, t.opts.tally()), body: body}
	} else {
		resp.Body = body
	}
	return resp, nil
}

// limitedBody fails, rather than ends, past limit bytes: a body cut short
// silently would read as a truncated bundle, retried as a network error.
type limitedBody struct {
	io.ReadCloser
	limit, left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > b.left {
		n, b.left = int(b.left), 0
		return n, fmt.Errorf("policy bundle download exceeds the size limit of %d bytes (--policy-max-bytes)", b.limit)
	}
	b.left -= int64(n)
	return n, err
}

// seconds rounds d up to whole seconds, OPA's unit for polling.
func seconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

// opaLogger passes the OPA downloader's and client's logs to logrus.
type opaLogger struct {
	log    logrus.FieldLogger
	fields map[string]any
}

func (l opaLogger) entry() logrus.FieldLogger { return l.log.WithFields(l.fields) }

func (l opaLogger) Debug(f string, a ...any) { l.entry().Debugf(f, a...) }
func (l opaLogger) Info(f string, a ...any)  { l.entry().Infof(f, a...) }
func (l opaLogger) Warn(f string, a ...any)  { l.entry().Warnf(f, a...) }

// Error is logged at warning level: what OPA reports as an error here
// (a failed download) is reported by the Remote itself.
func (l opaLogger) Error(f string, a ...any) { l.entry().Warnf(f, a...) }

func (l opaLogger) WithFields(f map[string]any) logging.Logger {
	m := make(map[string]any, len(l.fields)+len(f))
	for k, v := range l.fields {
		m[k] = v
	}
	for k, v := range f {
		m[k] = v
	}
	return opaLogger{log: l.log, fields: m}
}

// GetLevel is Info: OPA's debug-only work (dumping responses) stays off.
func (opaLogger) GetLevel() logging.Level { return logging.Info }
func (opaLogger) SetLevel(logging.Level)  {}
