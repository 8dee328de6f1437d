package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
)

// TestLosingTheAPIServerTurnsReadinessFalse: informers keep their last
// state when the API server goes away; past --api-lost-after, readiness
// turns false and the verbs are refused, and both recover with the API.
func TestLosingTheAPIServerTurnsReadinessFalse(t *testing.T) {
	client := haCluster()
	var down atomic.Bool
	client.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	verbs, health := freeAddr(t), freeAddr(t)
	log, _ := logtest.NewNullLogger()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Listen: verbs, HealthListen: health, Client: client, Policy: bundles.Config{Default: regosched.DefaultPolicy()},
			URLPrefix: "/scheduler", Version: "test", Verbs: true, SchedulerName: "regosched", APILostAfter: time.Second, Log: log,
		})
	}()
	until(t, "ready", func() bool { return get("http://"+health+"/readyz") == http.StatusOK })

	down.Store(true)
	until(t, "not ready once the API server is lost", func() bool {
		return get("http://"+health+"/readyz") == http.StatusServiceUnavailable
	})
	resp, err := http.Get("http://" + health + "/readyz") //nolint:gosec,noctx // loopback test URL
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), "no answer from the API server") || !strings.Contains(string(body), "connection refused") {
		t.Errorf("readyz body = %s, want why: no answer from the API server, connection refused", body)
	}
	filter := `{"Pod":{"metadata":{"name":"web","namespace":"shop","uid":"uid-web"}},"NodeNames":["node-1"]}`
	if status, body := post("http://"+verbs+"/scheduler/filter", filter); status != http.StatusServiceUnavailable {
		t.Errorf("filter without the API server = %d %s, want 503", status, body)
	}

	down.Store(false)
	until(t, "ready again", func() bool { return get("http://"+health+"/readyz") == http.StatusOK })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v after cancel", err)
	}
}
