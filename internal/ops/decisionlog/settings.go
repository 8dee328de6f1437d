package decisionlog

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Settings are where and how a front end logs its decisions, as an
// operator writes them: `regosched serve`'s --decision-log* flags and
// regosched-scheduler's decisionLog arg. Both builds check them and open
// their sink here, so that they take and refuse the same settings; only
// the names in their errors differ (Names). Those names and the defaults
// are internal/frontend/settings'.
type Settings struct {
	// Target is where events go: "" (off), Stdout, an http(s):// URL of an
	// OPA decision log service (events are POSTed to Target + "/logs" as
	// gzip'd JSON arrays, as OPA sends them), or else a file path,
	// appended to.
	Target string
	// SampleRate is the share of decisions logged, 0..1.
	SampleRate float64
	// MaskLabels are pod label keys kept out of events, as MaskMode says
	// (MaskDrop when empty, or MaskReplace).
	MaskLabels []string
	MaskMode   string
	// BufferEvents bounds the events waiting for the sink (0:
	// DefaultMaxEvents); more are dropped and counted.
	BufferEvents int
	// FlushInterval is how often buffered events are sent (0:
	// DefaultFlushInterval); a fuller buffer is sent sooner.
	FlushInterval time.Duration
	// HTTP targets only: the largest upload (uncompressed JSON array; 0:
	// OPA's default), the timeout of each upload (0: DefaultTimeout), the
	// retries of a failed upload (0: none), the CAs of an https service
	// (default: the system's), a bearer token file, and Insecure to send
	// that token over plain http.
	UploadLimitBytes int
	Timeout          time.Duration
	MaxRetries       int
	CACertFile       string
	BearerTokenFile  string
	Insecure         bool
}

// Stdout is the Target that writes events to standard output.
const Stdout = "stdout"

// DefaultTimeout bounds one upload: a collector that does not answer in
// time costs dropped events, never a slower decision.
const DefaultTimeout = 10 * time.Second

// CloseTimeout bounds the last flush when a front end stops, so that a
// stalled collector cannot hold a shutdown (or a leader lease) back.
const CloseTimeout = 5 * time.Second

// The settings, as Names is asked for them.
const (
	SettingTarget           = "target"
	SettingSample           = "sample"
	SettingMaskLabels       = "maskLabels"
	SettingMaskMode         = "maskMode"
	SettingBufferSize       = "bufferSize"
	SettingFlushInterval    = "flushInterval"
	SettingUploadLimitBytes = "uploadLimitBytes"
	SettingTimeout          = "timeout"
	SettingMaxRetries       = "maxRetries"
	SettingCACert           = "caCert"
	SettingBearerTokenFile  = "bearerTokenFile"
	SettingInsecure         = "insecure"
)

// Names gives a setting's name in errors, as the operator wrote it: a
// flag of serve, an arg of the plugin.
type Names func(setting string) string

// On says whether decisions are logged.
func (s Settings) On() bool { return s.Target != "" }

// Check refuses settings that name nothing, or that would send a token in
// clear; it opens nothing.
func (s Settings) Check(name Names) error {
	if !s.On() {
		return nil
	}
	if math.IsNaN(s.SampleRate) || s.SampleRate < 0 || s.SampleRate > 1 {
		return fmt.Errorf("%s %v: want a share between 0 and 1", name(SettingSample), s.SampleRate)
	}
	switch MaskMode(s.MaskMode) {
	case "", MaskDrop, MaskReplace:
	default:
		return fmt.Errorf("%s %q: want %s or %s", name(SettingMaskMode), s.MaskMode, MaskDrop, MaskReplace)
	}
	for _, n := range []struct {
		setting  string
		negative bool
	}{
		{SettingBufferSize, s.BufferEvents < 0}, {SettingFlushInterval, s.FlushInterval < 0},
		{SettingUploadLimitBytes, s.UploadLimitBytes < 0}, {SettingTimeout, s.Timeout < 0}, {SettingMaxRetries, s.MaxRetries < 0},
	} {
		if n.negative {
			return fmt.Errorf("%s cannot be negative", name(n.setting))
		}
	}
	isHTTP, err := s.http()
	if err != nil {
		return fmt.Errorf("%s %w", name(SettingTarget), err)
	}
	if !isHTTP {
		// The HTTP settings that have defaults (timeout, retries, upload
		// limit) are let be: a flag's default cannot be told from a value.
		for _, n := range []struct {
			setting string
			set     bool
		}{
			{SettingCACert, s.CACertFile != ""}, {SettingBearerTokenFile, s.BearerTokenFile != ""}, {SettingInsecure, s.Insecure},
		} {
			if n.set {
				return fmt.Errorf("%s is for an http(s):// %s", name(n.setting), name(SettingTarget))
			}
		}
	}
	if isHTTP && strings.HasPrefix(s.Target, "http://") && s.BearerTokenFile != "" && !s.Insecure {
		return fmt.Errorf("%s with an http:// %s would send the token in clear: use https, or %s",
			name(SettingBearerTokenFile), name(SettingTarget), name(SettingInsecure))
	}
	return nil
}

// http reports whether the target is an HTTP service, and refuses a URL
// of another scheme rather than take it for a file path.
func (s Settings) http() (bool, error) {
	if !strings.Contains(s.Target, "://") {
		return false, nil // a file path, or stdout
	}
	u, err := url.Parse(s.Target)
	if err != nil {
		return false, fmt.Errorf("%q: %w", s.Target, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return false, fmt.Errorf("%q: no host", s.Target)
		}
		return true, nil
	}
	return false, fmt.Errorf("%q: want %s, a file path or an http(s):// URL", s.Target, Stdout)
}

// Config checks s and opens its sink: a Config with s's settings and its
// Sink, for the front end to add who it is (InstanceID, Version) and
// where its metrics and logs go. The sink is the caller's to close if New
// fails.
func (s Settings) Config(name Names) (Config, error) {
	if !s.On() {
		return Config{}, errors.New("decisionlog: no target")
	}
	if err := s.Check(name); err != nil {
		return Config{}, err
	}
	cfg := Config{
		SampleRate: s.SampleRate, MaskLabels: s.MaskLabels, MaskMode: MaskMode(s.MaskMode),
		MaxEvents: s.BufferEvents, FlushInterval: s.FlushInterval,
	}
	isHTTP, _ := s.http() // checked
	var err error
	switch {
	case s.Target == Stdout:
		cfg.Sink = NewWriterSink(os.Stdout)
	case !isHTTP:
		if cfg.Sink, err = NewFileSink(s.Target); err != nil {
			return Config{}, fmt.Errorf("%s: %w", name(SettingTarget), err)
		}
	default:
		if cfg.Sink, err = s.httpSink(name); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// httpSink is the sink of an http(s) target.
func (s Settings) httpSink(name Names) (Sink, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if s.CACertFile != "" {
		pem, err := os.ReadFile(s.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name(SettingCACert), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", name(SettingCACert), s.CACertFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	retries := s.MaxRetries
	if retries == 0 {
		retries = -1 // HTTPConfig's 0 means its default; a setting's means none
	}
	sink, err := NewHTTPSink(HTTPConfig{
		URL: s.Target, Client: &http.Client{Timeout: timeout, Transport: transport},
		UploadSizeLimitBytes: s.UploadLimitBytes, MaxRetries: retries, BearerTokenFile: s.BearerTokenFile,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name(SettingTarget), err)
	}
	return sink, nil
}
