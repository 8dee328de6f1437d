package bundles

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/rest"

	"github.com/regosched/regosched/internal/plumbing/redirects"
)

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
	hc.CheckRedirect = redirects.SameOrigin("policy bundle")
	return hc, nil
}

func (p *limitPlugin) Prepare(req *http.Request) error { return p.inner.Prepare(req) }

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
