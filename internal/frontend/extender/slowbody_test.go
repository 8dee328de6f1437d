package extender

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// slowBodyServer serves the verbs over real HTTP with the default number of
// slots and the given body read timeout.
func slowBodyServer(t *testing.T, timeout time.Duration) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	log, _ := logtest.NewNullLogger()
	h, err := New(Config{
		URLPrefix: "/scheduler", BodyReadTimeout: timeout,
		Decider: &stubDecider{filter: &extenderv1.ExtenderFilterResult{}},
		Ready:   func() error { return nil }, Version: func() any { return nil },
		Registerer: reg, Gatherer: reg, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// idleBody opens a connection that sends a filter request's headers and
// the first byte of a body that claims 1000, then nothing more.
func idleBody(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// Callers that stall mid-body hold no slot: with every slot's worth of them
// connected, the scheduler's filter call is answered at once.
func TestIdleBodiesDoNotHoldTheSlots(t *testing.T) {
	srv := slowBodyServer(t, 10*time.Second)
	for range DefaultMaxConcurrent {
		idleBody(t, srv)
	}
	time.Sleep(100 * time.Millisecond) // let the server read their headers
	client := &http.Client{Timeout: 3 * time.Second}
	start := time.Now()
	resp, err := client.Post(srv.URL+"/scheduler/filter", "application/json", strings.NewReader(validArgs))
	if err != nil {
		t.Fatalf("filter call with %d idle bodies connected: %v", DefaultMaxConcurrent, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("filter call status %d, want 200", resp.StatusCode)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("filter call answered after %v, want at once", elapsed)
	}
}

// A body not read within BodyReadTimeout is answered 408 with an error that
// says so, and frees what it held.
func TestSlowBodyTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := slowBodyServer(t, timeout)
	conn := idleBody(t, srv)
	start := time.Now()
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "request body not read in time") {
		t.Errorf("stalled body answered %d %s, want 408 saying the body was not read in time", resp.StatusCode, body)
	}
	if elapsed := time.Since(start); elapsed > timeout+2*time.Second {
		t.Errorf("stalled body answered after %v, want about %v", elapsed, timeout)
	}
}
