package benche2e

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/frontend/decision"
	"github.com/regosched/regosched/internal/frontend/extender"
	"github.com/regosched/regosched/test/localcluster"
)

// nullExtender is the extender of ModeNullExtender: regosched's own HTTP
// layer (internal/frontend/extender: routing, body limit, decoding, encoding,
// metrics) over a decider that does no work: every node passes, none is
// preferred. The difference between it and ModeRegosched is what regosched's
// decisions cost (cache, Rego, waiting for peers in flight). It runs in the
// benchmark's own process (its CPU counts as "bench").
type nullExtender struct {
	srv *http.Server
	url string
}

// nullDecider passes every node and prefers none.
type nullDecider struct{}

func (nullDecider) Filter(_ context.Context, a *extenderv1.ExtenderArgs) (*decision.FilterAnswer, error) {
	return decision.NewFilterAnswer(a, nil, nil), nil
}

func (nullDecider) Prioritize(context.Context, *extenderv1.ExtenderArgs) (iter.Seq2[string, int64], error) {
	return func(func(string, int64) bool) {}, nil // the handler writes none as []
}

func (nullDecider) Preempt(context.Context, *extenderv1.ExtenderPreemptionArgs) (*extenderv1.ExtenderPreemptionResult, error) {
	return nil, errors.New("the null extender does not preempt")
}

func (nullDecider) Bind(context.Context, *extenderv1.ExtenderBindingArgs) error {
	return errors.New("the null extender does not bind")
}

func startNullExtender(log logrus.FieldLogger) (*nullExtender, error) {
	reg := prometheus.NewRegistry()
	h, err := extender.New(extender.Config{
		URLPrefix: "/scheduler", Decider: nullDecider{}, Ready: func() error { return nil },
		Version: func() any { return nil }, Registerer: reg, Gatherer: reg, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("null extender: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("null extender: %w", err)
	}
	e := &nullExtender{
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		url: "http://" + ln.Addr().String() + "/scheduler",
	}
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

func (e *nullExtender) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = e.srv.Close()
	}
}

// nullExtenderConfig turns the deployed scheduler configuration into the
// one of ModeNullExtender: its one profile renamed schedulerName, each
// extender pointed at url with filter and prioritize only (the scheduler
// binds and preempts), every other setting (nodeCacheCapable, weight,
// timeouts) as deployed.
func nullExtenderConfig(deployed []byte, url, schedulerName string) ([]byte, error) {
	cfg, err := localcluster.EditExtenders(deployed, "null extender:", func(ext map[string]any) {
		ext["urlPrefix"] = url
		delete(ext, "bindVerb")
		delete(ext, "preemptVerb")
	})
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	profiles, _ := doc["profiles"].([]any)
	if len(profiles) != 1 {
		return nil, fmt.Errorf("scheduler config: want one profile, got %d", len(profiles))
	}
	profile, ok := profiles[0].(map[string]any)
	if !ok {
		return nil, errors.New("scheduler config: profiles[0] is not a mapping")
	}
	profile["schedulerName"] = schedulerName
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return out, nil
}
