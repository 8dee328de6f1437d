package decisionlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Reasons of regosched_decision_logs_dropped_total.
const (
	ReasonBufferEvents = "buffer_events" // the buffer held MaxEvents
	ReasonBufferBytes  = "buffer_bytes"  // the buffer held MaxBytes
	ReasonTooLarge     = "too_large"     // one event exceeds the upload limit
	ReasonUploadFailed = "upload_failed" // the HTTP upload failed after its retries
	ReasonSinkError    = "sink_error"    // another sink failed to write
	ReasonEncodeError  = "encode_error"  // the event could not be encoded
	ReasonClosed       = "closed"        // Enqueue after Close
)

// Config configures a Logger.
type Config struct {
	Sink Sink
	// SampleRate is the share of decisions logged, 0..1; 1 logs all of them.
	SampleRate float64
	// Seed seeds the sampling so that tests can predict it; 0 picks a random seed.
	Seed uint64
	// MaskLabels are pod label keys masked as MaskMode says.
	MaskLabels []string
	MaskMode   MaskMode
	// MaskValue replaces values under MaskReplace; default DefaultMaskValue.
	MaskValue string
	// MaxEvents and MaxBytes bound the buffer; Enqueue drops past either.
	// Defaults 10000 events and 16 MiB.
	MaxEvents int
	MaxBytes  int
	// FlushBytes sends a batch once this many bytes are buffered, and
	// FlushInterval sends whatever is buffered this often; defaults 32 KiB and 5 s.
	FlushBytes    int
	FlushInterval time.Duration
	// InstanceID and Version become the events' labels.id and labels.version, as OPA's.
	InstanceID string
	Version    string
	// Registerer receives regosched_decision_logs_dropped_total; nil registers nothing.
	Registerer prometheus.Registerer
	Log        logrus.FieldLogger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultMaxEvents     = 10000
	DefaultMaxBytes      = 16 << 20
	DefaultFlushBytes    = 32 << 10
	DefaultFlushInterval = 5 * time.Second
)

// Logger buffers decisions and hands them to a sink on its own goroutine, so
// that a slow sink costs dropped events, never a slower decision.
type Logger struct {
	cfg     Config
	mask    *masker
	labels  map[string]string
	dropped *prometheus.CounterVec
	// The buffer's drop counters, resolved once so that a full buffer costs
	// Enqueue no label lookup.
	dropEvents, dropBytes, dropClosed prometheus.Counter

	sampleMu sync.Mutex
	rng      *rand.Rand

	mu    sync.Mutex
	queue []Event
	// spare is the previous flush's emptied slice, reused so that Enqueue
	// in steady state appends without allocating.
	spare  []Event
	bytes  int
	closed bool
	seq    uint64

	wake chan struct{} // one pending wake-up is enough
	done chan struct{}
	stop chan struct{}
	// ctx is the sinks' context; Close cancels it when its own deadline
	// passes so that a retrying upload gives up.
	ctx    context.Context
	cancel context.CancelFunc
}

// New starts a Logger; Close stops it.
func New(cfg Config) (*Logger, error) {
	if cfg.Sink == nil {
		return nil, errors.New("decisionlog: Config.Sink is required")
	}
	if cfg.SampleRate < 0 || cfg.SampleRate > 1 {
		return nil, fmt.Errorf("decisionlog: sample rate %v outside 0..1", cfg.SampleRate)
	}
	if cfg.Log == nil {
		return nil, errors.New("decisionlog: Config.Log is required")
	}
	m, err := newMasker(cfg.MaskLabels, cfg.MaskMode, cfg.MaskValue)
	if err != nil {
		return nil, err
	}
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.FlushBytes <= 0 {
		cfg.FlushBytes = DefaultFlushBytes
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	l := &Logger{
		cfg:  cfg,
		mask: m,
		labels: map[string]string{
			"id":      cfg.InstanceID,
			"version": cfg.Version,
		},
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_decision_logs_dropped_total",
			Help: "Decision log events dropped, by reason.",
		}, []string{"reason"}),
		rng:  rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		stop: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	for _, r := range []string{ReasonBufferEvents, ReasonBufferBytes, ReasonTooLarge, ReasonUploadFailed,
		ReasonSinkError, ReasonEncodeError, ReasonClosed} {
		l.dropped.WithLabelValues(r) // listed at 0 so that rate() sees the first drop
	}
	l.dropEvents = l.dropped.WithLabelValues(ReasonBufferEvents)
	l.dropBytes = l.dropped.WithLabelValues(ReasonBufferBytes)
	l.dropClosed = l.dropped.WithLabelValues(ReasonClosed)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(l.dropped); err != nil {
			return nil, fmt.Errorf("decisionlog: register dropped counter: %w", err)
		}
	}
	go l.run()
	return l, nil
}

// Enqueue buffers a copy of e (lists cut to MaxListed) if sampling keeps
// it, and drops it (counted) when the buffer is full; it never blocks on
// the sink. It reports whether e was kept.
func (l *Logger) Enqueue(e Event) bool {
	if !l.sampled() {
		return false
	}
	if e.Timestamp.IsZero() {
		e.Timestamp = l.cfg.Now()
	}
	// Copied before the buffer's checks, off the lock: a drop wastes the
	// copy, but the lock is held for the append alone.
	e.detach()
	size := e.approxSize()
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		l.dropClosed.Inc()
		return false
	case len(l.queue) >= l.cfg.MaxEvents:
		l.mu.Unlock()
		l.dropEvents.Inc()
		return false
	case l.bytes+size > l.cfg.MaxBytes:
		l.mu.Unlock()
		l.dropBytes.Inc()
		return false
	}
	l.queue = append(l.queue, e)
	l.bytes += size
	full := l.bytes >= l.cfg.FlushBytes
	l.mu.Unlock()
	if full {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return true
}

func (l *Logger) sampled() bool {
	switch l.cfg.SampleRate {
	case 1:
		return true
	case 0:
		return false
	}
	l.sampleMu.Lock()
	f := l.rng.Float64()
	l.sampleMu.Unlock()
	return f < l.cfg.SampleRate
}

// Dropped returns the counter vector, for callers that gather it themselves.
func (l *Logger) Dropped() *prometheus.CounterVec { return l.dropped }

// Flush asks the logger to send what is buffered now, without waiting.
func (l *Logger) Flush() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Close stops accepting events, sends what is buffered within ctx, and closes the sink.
func (l *Logger) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	var errs []error
	select {
	case <-l.done:
	case <-ctx.Done():
		l.cancel()
		<-l.done
		errs = append(errs, fmt.Errorf("decisionlog: close: final flush cut short: %w", ctx.Err()))
	}
	l.cancel()
	if err := l.cfg.Sink.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (l *Logger) run() {
	defer close(l.done)
	ctx := l.ctx
	t := time.NewTicker(l.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-l.wake:
		case <-t.C:
		case <-l.stop:
			// Close cancels ctx if its deadline passes before this flush ends.
			l.flush(ctx)
			return
		}
		l.flush(ctx)
	}
}

// flush takes the whole buffer, so that Enqueue finds room while the sink works.
func (l *Logger) flush(ctx context.Context) {
	l.mu.Lock()
	events := l.queue
	l.queue = l.spare
	l.spare = nil
	l.bytes = 0
	first := l.seq
	l.seq += uint64(len(events))
	l.mu.Unlock()
	if len(events) == 0 {
		return
	}
	batch := make([][]byte, 0, len(events))
	for i := range events {
		b, err := l.encode(&events[i], first+uint64(i))
		if err != nil {
			l.dropped.WithLabelValues(ReasonEncodeError).Inc()
			l.cfg.Log.WithError(err).Warn("decision log event dropped")
			continue
		}
		batch = append(batch, b)
	}
	// Cleared so that the spare holds no pod's labels until reused.
	clear(events)
	l.mu.Lock()
	l.spare = events[:0]
	l.mu.Unlock()
	if err := l.cfg.Sink.Write(ctx, batch); err != nil {
		l.countSinkError(err, len(batch))
		l.cfg.Log.WithError(err).Warn("decision log events dropped")
	}
}

// countSinkError counts the events err reports as dropped, by reason; an
// error that reports none counts the whole batch as a sink error.
func (l *Logger) countSinkError(err error, n int) {
	var des []*DropError
	collectDropErrors(err, &des)
	if len(des) == 0 {
		l.dropped.WithLabelValues(ReasonSinkError).Add(float64(n))
		return
	}
	for _, de := range des {
		l.dropped.WithLabelValues(de.Reason).Add(float64(de.Events))
	}
}

func collectDropErrors(err error, out *[]*DropError) {
	if de, ok := err.(*DropError); ok { //nolint:errorlint // the joined tree is walked by hand below
		*out = append(*out, de)
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collectDropErrors(e, out)
		}
	}
}

func (l *Logger) encode(e *Event, seq uint64) ([]byte, error) {
	labels, erased, masked := l.mask.apply(e.Pod.Labels)
	w := wireEvent{
		Labels:     l.labels,
		DecisionID: e.DecisionID,
		Path:       e.Verb.Path(),
		Input: wireInput{
			Pod: Pod{
				Namespace: e.Pod.Namespace,
				Name:      e.Pod.Name,
				UID:       e.Pod.UID,
				Labels:    labels,
			},
			Nodes:     e.Nodes,
			NodeCount: e.NodeCount,
		},
		Result: wireResult{
			Outcome: e.Outcome,
			Denied:  e.Denied,
			Scores:  e.Scores,
			Victims: e.Victims,
			Node:    e.Node,
			Error:   e.Error,
		},
		Erased:    erased,
		Masked:    masked,
		Truncated: e.Truncated,
		Timestamp: e.Timestamp.UTC(),
	}
	if w.DecisionID == "" {
		// Unique per logger and ordered; the instance ID tells loggers apart.
		w.DecisionID = l.cfg.InstanceID + "-" + strconv.FormatUint(seq, 10)
	}
	if len(e.Bundles) > 0 {
		w.Bundles = make(map[string]bundleInfo, len(e.Bundles))
		for name, rev := range e.Bundles {
			w.Bundles[name] = bundleInfo{Revision: rev}
		}
	}
	if e.Duration > 0 {
		w.Metrics = map[string]any{MetricDecisionNS: e.Duration.Nanoseconds()}
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("decisionlog: encode event %s: %w", w.DecisionID, err)
	}
	return b, nil
}
