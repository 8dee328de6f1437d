package logbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// jsonLogger is a logrus logger at level writing JSON into the returned
// buffer, as regosched serve --log-format=json does.
func jsonLogger(level logrus.Level) (*logrus.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetFormatter(&logrus.JSONFormatter{})
	l.SetLevel(level)
	return l, &buf
}

// routeKlog routes klog into l for the test and restores klog's logger and
// verbosity afterwards (both are process-global: these tests do not run in
// parallel).
func routeKlog(t *testing.T, l *logrus.Logger) {
	t.Helper()
	old, err := strconv.Atoi(klogVerbosity())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		klog.ClearLogger()
		setKlogVerbosity(old)
	})
	Klog(l)
}

// entries decodes the JSON lines in buf.
func entries(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// byMsg finds the entry with message msg.
func byMsg(es []map[string]any, msg string) map[string]any {
	for _, e := range es {
		if e["msg"] == msg {
			return e
		}
	}
	return nil
}

func TestKlogComesOutAsLogrusJSON(t *testing.T) {
	l, buf := jsonLogger(logrus.DebugLevel)
	routeKlog(t, l)

	klog.InfoS("Caches populated", "type", "*v1.Pod", "count", 3)
	klog.ErrorS(errors.New("connection refused"), "Failed to watch", "resource", "pods")
	klog.V(4).InfoS("Watch close", "reflector", "pods")
	klog.V(2).Infof("lease %s held by %s", "regosched", "a")
	klog.Errorf("error retrieving resource lock %s: %v", "regosched-system/regosched", "timeout")
	klog.Flush()

	es := entries(t, buf)
	want := []struct {
		msg    string
		level  string
		fields map[string]any
	}{
		{"Caches populated", "info", map[string]any{"type": "*v1.Pod", "count": float64(3)}},
		{"Failed to watch", "error", map[string]any{"resource": "pods", "error": "connection refused"}},
		{"Watch close", "debug", map[string]any{"reflector": "pods"}},
		{"lease regosched held by a", "debug", nil},
		{"error retrieving resource lock regosched-system/regosched: timeout", "error", nil},
	}
	if len(es) != len(want) {
		t.Fatalf("got %d entries, want %d:\n%s", len(es), len(want), buf)
	}
	for _, w := range want {
		e := byMsg(es, w.msg)
		if e == nil {
			t.Errorf("no entry %q in:\n%s", w.msg, buf)
			continue
		}
		if e["level"] != w.level {
			t.Errorf("%q: level %v, want %s", w.msg, e["level"], w.level)
		}
		if e["component"] != "klog" {
			t.Errorf("%q: component %v, want klog", w.msg, e["component"])
		}
		for k, v := range w.fields {
			if e[k] != v {
				t.Errorf("%q: %s = %#v, want %#v", w.msg, k, e[k], v)
			}
		}
		if _, ok := e["time"]; !ok {
			t.Errorf("%q: no time field", w.msg)
		}
	}
	// An unstructured klog.Error carries no error value: no "error": null.
	if e := byMsg(es, want[4].msg); e != nil {
		if _, ok := e["error"]; ok {
			t.Errorf("klog.Errorf line has an error field: %v", e)
		}
	}
}

func TestKlogFollowsTheLogrusLevel(t *testing.T) {
	l, buf := jsonLogger(logrus.InfoLevel)
	routeKlog(t, l)
	if got := klogVerbosity(); got != "0" {
		t.Errorf("klog -v at info = %s, want 0", got)
	}

	klog.V(4).InfoS("debug detail")
	klog.V(1).Info("steady state")
	klog.InfoS("shown")
	klog.ErrorS(errors.New("boom"), "failed")

	es := entries(t, buf)
	if len(es) != 2 || byMsg(es, "shown") == nil || byMsg(es, "failed") == nil {
		t.Errorf("at info, want only the V(0) and the error line, got:\n%s", buf)
	}

	// Warn hides klog's info lines too; errors stay.
	buf.Reset()
	l.SetLevel(logrus.WarnLevel)
	klog.InfoS("hidden at warn")
	klog.ErrorS(errors.New("boom"), "still shown")
	es = entries(t, buf)
	if len(es) != 1 || byMsg(es, "still shown") == nil {
		t.Errorf("at warn, want only the error line, got:\n%s", buf)
	}
}

func TestKlogText(t *testing.T) {
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetFormatter(&logrus.TextFormatter{DisableColors: true})
	routeKlog(t, l)

	klog.InfoS("Starting reflector", "type", "*v1.Node")
	got := buf.String()
	for _, want := range []string{`level=info`, `msg="Starting reflector"`, `type="*v1.Node"`, `component=klog`} {
		if !strings.Contains(got, want) {
			t.Errorf("text line %q lacks %s", got, want)
		}
	}
}

type feature string // as k8s.io/component-base/featuregate.Feature

type quantity struct{ s string }

func (q quantity) String() string { return q.s }

// Values of other types than Go's basic ones keep a readable form: a named
// string as the string, a Stringer as its String, the rest as JSON.
func TestKlogValues(t *testing.T) {
	l, buf := jsonLogger(logrus.InfoLevel)
	routeKlog(t, l)

	klog.InfoS("values", "feature", feature("WatchListClient"), "cpu", quantity{"100m"},
		"labels", map[string]string{"app": "redis"}, "pod", klog.KRef("shop", "cache-0"))
	es := entries(t, buf)
	if len(es) != 1 {
		t.Fatalf("got:\n%s", buf)
	}
	want := map[string]any{"feature": "WatchListClient", "cpu": "100m", "labels": `{"app":"redis"}`,
		"pod": map[string]any{"name": "cache-0", "namespace": "shop"}}
	for k, v := range want {
		if got := es[0][k]; fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
}

// klog's -v lets through exactly the V(n) lines the logrus level shows, up
// to V(5) at trace (client-go's per-request lines at V(6) and above stay
// off).
func TestKlogLevelAndVerbosityAgree(t *testing.T) {
	for _, level := range []logrus.Level{logrus.InfoLevel, logrus.DebugLevel, logrus.TraceLevel} {
		for n := 0; n <= 5; n++ {
			shown := level >= KlogLevel(n)
			if passed := n <= KlogVerbosity(level); shown != passed {
				t.Errorf("level %s: V(%d) shown by logrus %v, passed by klog -v=%d %v", level, n, shown, KlogVerbosity(level), passed)
			}
		}
	}
	for level, want := range map[logrus.Level]int{logrus.ErrorLevel: 0, logrus.WarnLevel: 0, logrus.InfoLevel: 0, logrus.DebugLevel: 4, logrus.TraceLevel: 5} {
		if got := KlogVerbosity(level); got != want {
			t.Errorf("KlogVerbosity(%s) = %d, want %d", level, got, want)
		}
	}
}

func TestGoRedis(t *testing.T) {
	t.Cleanup(logging.Enable) // go-redis's own stderr logger
	l, buf := jsonLogger(logrus.InfoLevel)
	GoRedis(l)

	// go-redis logs an unknown client-side cache strategy when a client is
	// made, without any connection.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ClientSideCacheStrategy: 99})
	defer c.Close()
	es := entries(t, buf)
	if len(es) != 1 {
		t.Fatalf("want one entry, got:\n%s", buf)
	}
	e := es[0]
	if e["msg"] != "redis: unknown ClientSideCacheStrategy 99; falling back to CSCStrategySharedTracking" ||
		e["level"] != "warning" || e["component"] != "go-redis" {
		t.Errorf("entry %v", e)
	}

	// A trailing newline (some of go-redis's formats end in one) is dropped.
	buf.Reset()
	goRedisLogger{log: l}.Printf(context.Background(), "redis: %s\n", "x")
	if es := entries(t, buf); len(es) != 1 || es[0]["msg"] != "redis: x" {
		t.Errorf("got %s", buf)
	}
}
