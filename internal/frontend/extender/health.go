package extender

import (
	"fmt"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewHealth returns a handler of the health endpoints alone: /healthz,
// /readyz, /version and /metrics, answered as New answers them, and nothing
// else (no verb, no profiling). It is meant for a second, plain-HTTP
// listener next to a mutual-TLS one: the kubelet's probes and a metrics
// scraper present no client certificate, and nothing on this handler can
// place a pod. Only cfg.Ready, cfg.Version, cfg.Gatherer and cfg.Log are
// used and no metric is registered, so cfg may be the very Config given to
// New.
func NewHealth(cfg Config) http.Handler {
	r := mux.NewRouter()
	healthRoutes(r, cfg)
	errorRoutes(r)
	return recoverer(cfg.Log, r)
}

// healthRoutes adds the health endpoints to r; New and NewHealth share it
// so that both ports answer alike.
func healthRoutes(r *mux.Router, cfg Config) {
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}).Methods(http.MethodGet)
	r.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := cfg.Ready(); err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}).Methods(http.MethodGet)
	r.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, cfg.Version())
	}).Methods(http.MethodGet)
	r.Handle("/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})).Methods(http.MethodGet)
}

// errorRoutes makes r answer unknown paths and wrong methods with the JSON
// error body of every other answer.
func errorRoutes(r *mux.Router) {
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", req.Method, req.URL.Path))
	})
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s", req.URL.Path))
	})
}
