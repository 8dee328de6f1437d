// Package extender is regosched's HTTP API: the kube-scheduler extender verbs
// under a URL prefix, plus health, readiness, version and metrics endpoints.
//
// Wire types come from k8s.io/kube-scheduler/extender/v1. Bodies are limited
// in size and decoded strictly; every error is a JSON object
// {"error": "..."} with a status that says whose fault it is (400 malformed,
// 405 wrong method, 413 too large, 500/503 ours). The scheduler treats any
// status but 200 as a failed call.
package extender

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"golang.org/x/sync/semaphore"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/frontend/decision"
)

// DefaultMaxBodyBytes bounds a request body. A scheduler that is not
// node-cache-capable sends whole Node objects, several KiB each: 32 MiB
// holds a few thousand of them.
const DefaultMaxBodyBytes = 32 << 20

// DefaultMaxConcurrent bounds the verb requests served at once: the
// scheduler makes one filter or prioritize call at a time and binds in a
// few goroutines; more than this is a flood, whose bodies must not all be
// in memory together.
const DefaultMaxConcurrent = 16

// DefaultBodyReadTimeout bounds the time to read one request body: the
// scheduler sends its body at once, and a caller that trickles or stalls
// must not hold memory or a slot until the server's ReadTimeout.
const DefaultBodyReadTimeout = 3 * time.Second

// Decider answers the extender verbs.
type Decider interface {
	Filter(ctx context.Context, args *extenderv1.ExtenderArgs) (*decision.FilterAnswer, error)
	Prioritize(ctx context.Context, args *extenderv1.ExtenderArgs) (iter.Seq2[string, int64], error)
	Preempt(ctx context.Context, args *extenderv1.ExtenderPreemptionArgs) (*extenderv1.ExtenderPreemptionResult, error)
	Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error
}

// Config wires the handler.
type Config struct {
	// URLPrefix is the path under which the verbs are served, as in the
	// scheduler's extender urlPrefix, e.g. "/scheduler".
	URLPrefix string
	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxConcurrent bounds the verb requests decided at once (others wait
	// for a slot while their caller waits); 0 means DefaultMaxConcurrent.
	// A request takes its slot once its body is read; bodies being read
	// share a budget of MaxConcurrent times MaxBodyBytes, charged as their
	// bytes arrive.
	MaxConcurrent int
	// BodyReadTimeout bounds the time to read a request body, from the end
	// of its headers; a body not read by then is answered 408. 0 means
	// DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// Decider answers the verbs; it may be nil when NoVerbs is set.
	Decider Decider
	// NoVerbs, when set, serves no verb: each answers 404 with this text,
	// so that a scheduler sent here by mistake says why in its logs
	// (regosched beside a scheduler that decides in process).
	NoVerbs string
	// Ready returns nil when decisions can be trusted (caches synced, a
	// policy active, the API server in reach), else why not.
	Ready func() error
	// Serving, when set, returns nil when this replica may answer the verbs
	// (ready, and the leader when replicas elect one); Ready is used when
	// it is nil. It differs from Ready so that a standby is Ready (a rollout
	// proceeds) yet refuses the verbs.
	Serving func() error
	// VerbsOnly leaves the health endpoints and metrics to a second
	// listener (NewHealth): /version and /metrics tell the policy's errors
	// and the cluster's shape to whoever can reach the verb port.
	VerbsOnly bool
	// Version returns the document served at /version.
	Version func() any
	// Registerer receives the request metrics; Gatherer is served at /metrics.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Profiling serves Go's pprof profiles under /debug/pprof/, as
	// Kubernetes components do with --profiling.
	Profiling bool
	Log       logrus.FieldLogger
}

type handler struct {
	cfg   Config
	slots chan struct{} // one per verb request being decided
	// reading is the budget of body bytes held by requests, charged as
	// they arrive, so that slow bodies cost what they sent, not a slot.
	reading *semaphore.Weighted
	bodies  bodyBuffers
	args    argsDecoder
	// priorities recycles the lists prioritize answers with.
	priorities recycled[extenderv1.HostPriority]
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

// New returns the HTTP handler of the whole API.
func New(cfg Config) (http.Handler, error) {
	if cfg.Decider == nil && cfg.NoVerbs == "" {
		// A nil Decider would fail every verb call with a panic.
		return nil, errors.New("extender: Decider is required unless NoVerbs says why there is none")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	h := &handler{
		cfg:     cfg,
		slots:   make(chan struct{}, cfg.MaxConcurrent),
		reading: semaphore.NewWeighted(cfg.MaxBodyBytes * int64(cfg.MaxConcurrent)),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_requests_total",
			Help: "Extender requests by verb and outcome (ok, bad_request, too_large, body_timeout, not_ready, error; busy: the caller left while every slot was taken).",
		}, []string{"verb", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "regosched_request_duration_seconds",
			Help:    "Time to answer an extender request, from the first byte read to the last written.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 13), // 100µs .. ~6s, past the scheduler's 5s httpTimeout
		}, []string{"verb", "outcome"}),
	}
	for _, c := range []prometheus.Collector{h.requests, h.duration} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("registering request metrics: %w", err)
		}
	}

	r := mux.NewRouter()
	prefix := "/" + strings.Trim(cfg.URLPrefix, "/")
	if prefix == "/" {
		prefix = ""
	}
	if cfg.NoVerbs != "" {
		noVerb := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusNotFound, cfg.NoVerbs) })
		for _, name := range []string{"filter", "prioritize", "preempt", "bind"} {
			r.Handle(prefix+"/"+name, noVerb)
		}
	} else {
		r.Handle(prefix+"/filter", verb(h, "filter", h.args.decode, h.filter, h.args.release)).Methods(http.MethodPost)
		r.Handle(prefix+"/prioritize", verb(h, "prioritize", h.args.decode, h.prioritize, h.args.release)).Methods(http.MethodPost)
		r.Handle(prefix+"/preempt", verb(h, "preempt", decodePreemptionArgs, h.preempt, nil)).Methods(http.MethodPost)
		r.Handle(prefix+"/bind", verb(h, "bind", decodeBindingArgs, h.bind, nil)).Methods(http.MethodPost)
	}
	if !cfg.VerbsOnly {
		healthRoutes(r, cfg)
	}
	// Profiles stay on the verb port, behind its client authentication.
	if cfg.Profiling {
		r.HandleFunc("/debug/pprof/profile", pprof.Profile)
		r.HandleFunc("/debug/pprof/trace", pprof.Trace)
		r.PathPrefix("/debug/pprof/").HandlerFunc(pprof.Index)
	}
	errorRoutes(r)
	return recoverer(cfg.Log, r), nil
}

// outcome of one request, for metrics and logs.
type outcome struct {
	status int
	body   any
	label  string
	err    error
	// written, when set, runs once body is written (to recycle its memory).
	written func()
}

// verb wraps an extender verb: body limit, decoding, metrics and logging.
// release, if set, gets decoded arguments back once the answer is written.
func verb[A any](h *handler, name string, decodeBody func([]byte) (*A, error), answer func(context.Context, *A) outcome, release func(*A)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The body is read before a slot is taken, within a deadline and
		// the byte budget: callers that stall mid-body hold neither a slot
		// nor more memory than they sent, and the scheduler's next call is
		// not queued behind them.
		body := h.limitBody(w, r)
		defer body.release()
		args, err := decode(&h.bodies, body, r.ContentLength, h.cfg.MaxBodyBytes, decodeBody)
		if err == nil {
			body.read()
			// A body that failed needs no slot: its answer is the error (and
			// a read error has cancelled the request's context already).
			// Its read deadline stays: the server drains an unread body
			// before answering, which must not wait for a stalled caller.
			select {
			case h.slots <- struct{}{}:
				defer func() { <-h.slots }()
			case <-r.Context().Done():
				// The caller gave up waiting for a slot: nobody reads an answer.
				h.requests.WithLabelValues(name, "busy").Inc()
				return
			}
		}
		var out outcome
		serving := h.cfg.Serving
		if serving == nil {
			serving = h.cfg.Ready
		}
		notReady := serving()
		switch {
		case err == nil && notReady != nil:
			// Deciding on a cache that has not synced (or as a replica that
			// does not lead) could break rules: refuse, the scheduler retries.
			out = outcome{status: http.StatusServiceUnavailable, label: "not_ready",
				err: fmt.Errorf("not ready: %w", notReady)}
		case err == nil:
			out = answer(r.Context(), args)
		case errors.As(err, new(*http.MaxBytesError)):
			out = outcome{status: http.StatusRequestEntityTooLarge, label: "too_large",
				err: fmt.Errorf("request body exceeds %d bytes", h.cfg.MaxBodyBytes)}
		case errors.Is(err, errBodyTimeout):
			out = outcome{status: http.StatusRequestTimeout, label: "body_timeout", err: err}
		default:
			out = outcome{status: http.StatusBadRequest, label: "bad_request", err: err}
		}
		if out.body == nil {
			out.body = errorBody{Error: out.err.Error()}
		}
		writeJSON(w, out.status, out.body)
		if out.written != nil {
			out.written()
		}
		if args != nil && release != nil {
			defer release(args) // after the log below, which reads the pod
		}

		elapsed := time.Since(start)
		h.requests.WithLabelValues(name, out.label).Inc()
		h.duration.WithLabelValues(name, out.label).Observe(elapsed.Seconds())
		log := h.cfg.Log.WithFields(logrus.Fields{"verb": name, "status": out.status, "duration": elapsed})
		if args != nil {
			log = log.WithField("pod", podName(args))
		}
		if out.err != nil {
			log.WithError(out.err).Warn("extender request failed")
		} else {
			log.Debug("extender request")
		}
	})
}

func (h *handler) filter(ctx context.Context, args *extenderv1.ExtenderArgs) outcome {
	verdict, err := h.cfg.Decider.Filter(ctx, args)
	if err != nil {
		// The Error field reaches the scheduler's logs and the pod's events,
		// where a bare status code would not.
		return outcome{status: http.StatusOK, label: "error", err: err,
			body: &extenderv1.ExtenderFilterResult{Error: err.Error()}}
	}
	// args was decoded for this request alone, and nothing reads its
	// candidates after the answer: the answer may reuse their list.
	return outcome{status: http.StatusOK, label: "ok", body: verdict.AnswerInPlace(args)}
}

func (h *handler) prioritize(ctx context.Context, args *extenderv1.ExtenderArgs) outcome {
	scores, err := h.cfg.Decider.Prioritize(ctx, args)
	if err != nil {
		return outcome{status: http.StatusInternalServerError, label: "error", err: err}
	}
	list := h.priorities.get()
	for host, score := range scores {
		list = append(list, extenderv1.HostPriority{Host: host, Score: score})
	}
	if list == nil {
		list = extenderv1.HostPriorityList{} // [], not null: no candidate scored
	}
	return outcome{status: http.StatusOK, label: "ok", body: extenderv1.HostPriorityList(list), written: func() { h.priorities.put(list) }}
}

func (h *handler) preempt(ctx context.Context, args *extenderv1.ExtenderPreemptionArgs) outcome {
	res, err := h.cfg.Decider.Preempt(ctx, args)
	if err != nil {
		// ExtenderPreemptionResult has no error field.
		return outcome{status: http.StatusInternalServerError, label: "error", err: err}
	}
	return outcome{status: http.StatusOK, label: "ok", body: res}
}

func (h *handler) bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) outcome {
	if err := h.cfg.Decider.Bind(ctx, args); err != nil {
		// The Error field makes the scheduler forget the pod's assumed
		// placement and requeue it; its text reaches the pod's events.
		return outcome{status: http.StatusOK, label: "error", err: err,
			body: &extenderv1.ExtenderBindingResult{Error: err.Error()}}
	}
	return outcome{status: http.StatusOK, label: "ok", body: &extenderv1.ExtenderBindingResult{}}
}

func podName(args any) string {
	switch a := args.(type) {
	case *extenderv1.ExtenderArgs:
		return a.Pod.Namespace + "/" + a.Pod.Name
	case *extenderv1.ExtenderPreemptionArgs:
		return a.Pod.Namespace + "/" + a.Pod.Name
	case *extenderv1.ExtenderBindingArgs:
		return a.PodNamespace + "/" + a.PodName
	}
	return ""
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The client may be gone; there is no one left to tell.
	_ = gojson.NewEncoder(w).Encode(v)
}

// recoverer turns a panic into a 500 instead of a dropped connection; the
// handlers are written not to panic, this is the last line of defence.
func recoverer(log logrus.FieldLogger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
					panic(v)
				}
				log.WithField("panic", v).WithField("path", r.URL.Path).Error("handler panicked")
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}
