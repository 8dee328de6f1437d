// Package logbridge routes the logs of libraries that keep a process-global
// logger of their own — klog (client-go's informers and reflectors, leader
// election, apimachinery) and go-redis — into regosched's logrus logger, so
// that a process writes one stream, in one format, filtered by one level.
//
// Both libraries' loggers are process-global: main calls these functions
// once, before it starts any client; tests that call them restore the
// previous state (see the tests).
package logbridge

import (
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"strconv"

	"github.com/bombsimon/logrusr/v4"
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// Klog makes klog write through log: structured calls (InfoS, ErrorS) become
// one entry each with their key/value pairs as fields, errors at error level
// with the error field, and klog's verbosity is set from log's level (see
// KlogVerbosity), so that klog formats nothing that log would drop. Every
// entry carries component=klog. Set log's level and formatter first; later
// changes of the formatter apply, changes of the level do not change klog's
// verbosity.
//
// klog's unstructured Warning calls reach a logr.Logger as plain Info calls
// (klog passes no severity), so they come out at info level.
//
// With a logger set, klog writes to it alone (no stderr, no files), so
// klog.LogToStderr needs no change.
func Klog(log *logrus.Logger) {
	klog.SetLogger(klogLogger(log))
	setKlogVerbosity(KlogVerbosity(log.GetLevel()))
}

// klogLogger is the logr.Logger Klog hands to klog.
func klogLogger(log *logrus.Logger) logr.Logger {
	inner := logrusr.New(log.WithField("component", "klog"), logrusr.WithFormatter(formatValue))
	return logr.New(&levelSink{inner: inner.GetSink()})
}

// formatValue is the field value of a klog value that is not a Go basic
// type, logr.Marshaler or error (logrusr handles those): a Stringer's
// String, a named basic type (featuregate.Feature, a klog.Level, a
// resource name) as its underlying value rather than logrusr's JSON string
// ("\"WatchListClient\""), anything else as JSON, as logrusr does.
func formatValue(v any) (out any) {
	if s, ok := v.(fmt.Stringer); ok {
		defer func() {
			if r := recover(); r != nil { // e.g. a nil pointer with a value-receiver String
				out = fmt.Sprintf("<panic in String: %v>", r)
			}
		}()
		return s.String()
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.String:
		return rv.String()
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint()
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// KlogLevel is the logrus level of a klog V(n) line.
//
// klog's verbosity scale has many steps where logrus has three below warn,
// so they are grouped after the Kubernetes logging conventions
// (kubernetes/community, contributors/devel/sig-instrumentation/logging.md):
// V(0) is "always visible to a cluster operator" → info; V(1) to V(3), the
// reasonable default and steady-state detail, and V(4), "debug level
// verbosity" → debug; V(5), "trace level verbosity", and above → trace.
// regosched's own info lines already say what V(1) to V(3) would (caches
// synced, leader elected), so an info stream keeps klog's V(0) lines only.
func KlogLevel(v int) logrus.Level {
	switch {
	case v <= 0:
		return logrus.InfoLevel
	case v <= 4:
		return logrus.DebugLevel
	default:
		return logrus.TraceLevel
	}
}

// KlogVerbosity is klog's -v for a logrus level: the highest V(n) that level
// shows under KlogLevel. klog checks it before it formats anything, so lines
// the level would hide cost nothing. Trace stops at V(5): client-go logs
// every request at V(6) and bodies from V(8), which --log-level never turns
// on.
func KlogVerbosity(level logrus.Level) int {
	switch {
	case level >= logrus.TraceLevel:
		return 5
	case level >= logrus.DebugLevel:
		return 4
	default:
		return 0
	}
}

// setKlogVerbosity sets klog's -v, which klog exposes only as a flag.
func setKlogVerbosity(v int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	// "v" is klog's Level flag; an int never fails to parse.
	_ = fs.Set("v", strconv.Itoa(v))
}

// klogVerbosity is klog's current -v.
func klogVerbosity() string {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs.Lookup("v").Value.String()
}

// levelSink is logrusr's sink with klog's V(n) mapped by KlogLevel. logrusr
// (github.com/bombsimon/logrusr) turns key/value pairs into fields and
// errors into logrus's error field; it logs V(n) at logrus level
// InfoLevel+n (as its Enabled documents), which would put klog's V(1)
// at debug but V(2) at trace and V(3) and above nowhere. levelSink passes
// it the offset of the level KlogLevel chooses instead.
type levelSink struct {
	inner logr.LogSink
}

// v is the logrusr V level that logrusr logs at level l.
func v(l logrus.Level) int { return int(l) - int(logrus.InfoLevel) }

func (s *levelSink) Init(info logr.RuntimeInfo) {
	info.CallDepth++ // this sink's own frame
	s.inner.Init(info)
}

func (s *levelSink) Enabled(level int) bool { return s.inner.Enabled(v(KlogLevel(level))) }

func (s *levelSink) Info(level int, msg string, keysAndValues ...any) {
	s.inner.Info(v(KlogLevel(level)), msg, keysAndValues...)
}

// Error logs at error level. klog's unstructured Error calls pass a nil err:
// those are logged without an error field (logrusr would add "error": null),
// through Info at the error level's offset.
func (s *levelSink) Error(err error, msg string, keysAndValues ...any) {
	if err == nil {
		s.inner.Info(v(logrus.ErrorLevel), msg, keysAndValues...)
		return
	}
	s.inner.Error(err, msg, keysAndValues...)
}

func (s *levelSink) WithValues(keysAndValues ...any) logr.LogSink {
	return &levelSink{inner: s.inner.WithValues(keysAndValues...)}
}

func (s *levelSink) WithName(name string) logr.LogSink {
	return &levelSink{inner: s.inner.WithName(name)}
}

// WithCallDepth passes klog's call depth on (logrusr reports callers only
// when asked to, which Klog does not, but the depth stays right).
func (s *levelSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.inner.(logr.CallDepthLogSink); ok {
		return &levelSink{inner: cd.WithCallDepth(depth)}
	}
	return s
}

var _ logr.CallDepthLogSink = (*levelSink)(nil)
