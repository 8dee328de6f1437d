package logbridge

import (
	"io"
	"sort"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
)

// ToLogr returns a logrus logger whose entries go to sink, for code of
// regosched that runs inside another program's process (the framework
// plugin inside kube-scheduler): that program's log stream, format and
// verbosity then hold regosched's entries too. Error and above become
// sink.Error calls (with the entry's error field as the error), Warn and
// Info become Info at verbosity 0, Debug at 4 and Trace at 5, as klog's
// conventions have them. level is the most verbose logrus level passed on.
func ToLogr(sink logr.Logger, level logrus.Level) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	l.SetLevel(level)
	l.AddHook(logrHook{sink: sink})
	return l
}

type logrHook struct{ sink logr.Logger }

func (logrHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h logrHook) Fire(e *logrus.Entry) error {
	keys := make([]string, 0, len(e.Data))
	for k := range e.Data {
		if k != logrus.ErrorKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // a stable order, as logrus's own formatters give
	kv := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, e.Data[k])
	}
	if e.Level <= logrus.ErrorLevel {
		err, _ := e.Data[logrus.ErrorKey].(error)
		h.sink.Error(err, e.Message, kv...)
		return nil
	}
	v := 0
	switch e.Level {
	case logrus.DebugLevel:
		v = 4
	case logrus.TraceLevel:
		v = 5
	}
	h.sink.V(v).Info(e.Message, kv...)
	return nil
}
