package extender

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// A body that claims the limit but sends little costs what it sends, not
// what it claims: eight such idle callers once cost 256 MiB of heap.
func TestClaimedLengthIsNotPreallocated(t *testing.T) {
	var b bodyBuffers
	const claimed = 32 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 8 {
		_, err := decode(&b, strings.NewReader(`{}`), claimed, claimed, func(p []byte) (*struct{}, error) { return &struct{}{}, nil })
		if err != nil {
			t.Fatal(err)
		}
		b = bodyBuffers{} // a fresh buffer each time, as eight concurrent requests would get
	}
	runtime.ReadMemStats(&after)
	// Claims honoured would cost 8 x 32 MiB; the preallocation cap allows
	// 8 x 1 MiB. The margin is for what else the process (the race
	// detector, earlier tests' goroutines) allocates meanwhile.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("8 requests claiming %d bytes and sending 2 allocated %d bytes, want under 64 MiB", claimed, grew)
	}
}

// blockingDecider holds every bind until release is closed, counting how
// many it holds at once.
type blockingDecider struct {
	stubDecider
	release   chan struct{}
	now, peak atomic.Int32
	arrived   chan struct{}
}

func (d *blockingDecider) Bind(ctx context.Context, _ *extenderv1.ExtenderBindingArgs) error {
	n := d.now.Add(1)
	defer d.now.Add(-1)
	for {
		p := d.peak.Load()
		if n <= p || d.peak.CompareAndSwap(p, n) {
			break
		}
	}
	d.arrived <- struct{}{}
	select {
	case <-d.release:
	case <-ctx.Done():
	}
	return nil
}

// No more than MaxConcurrent verb requests are served at once; the others
// wait for a slot and are served once one frees.
func TestConcurrentRequestsBounded(t *testing.T) {
	d := &blockingDecider{release: make(chan struct{}), arrived: make(chan struct{}, 10)}
	log, _ := logtest.NewNullLogger()
	reg := prometheus.NewRegistry()
	h, err := New(Config{URLPrefix: "/scheduler", MaxConcurrent: 2, Decider: d, Ready: func() error { return nil },
		Version: func() any { return nil }, Registerer: reg, Gatherer: reg, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	const requests = 5
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodPost, "/scheduler/bind", strings.NewReader(`{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n1"}`))
			h.ServeHTTP(httptest.NewRecorder(), req)
		})
	}
	for range 2 {
		<-d.arrived
	}
	select {
	case <-d.arrived:
		t.Fatal("a third request was served while two held their slots")
	case <-time.After(200 * time.Millisecond):
	}
	close(d.release)
	wg.Wait()
	if got := d.peak.Load(); got != 2 {
		t.Errorf("at most %d binds at once, want 2", got)
	}
}
