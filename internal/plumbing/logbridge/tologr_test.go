package logbridge

import (
	"errors"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
)

func TestToLogr(t *testing.T) {
	tests := []struct {
		name  string
		level logrus.Level
		log   func(l *logrus.Logger)
		want  []string
	}{
		{
			name:  "info with fields in key order",
			level: logrus.InfoLevel,
			log:   func(l *logrus.Logger) { l.WithFields(logrus.Fields{"pod": "a/b", "node": "n1"}).Info("denied") },
			want:  []string{`"level"=0 "msg"="denied" "node"="n1" "pod"="a/b"`},
		},
		{
			name:  "error carries the error",
			level: logrus.InfoLevel,
			log:   func(l *logrus.Logger) { l.WithError(errors.New("boom")).WithField("pod", "a/b").Error("describing") },
			want:  []string{`"msg"="describing" "error"="boom" "pod"="a/b"`},
		},
		{
			name:  "debug is verbosity 4, dropped below the level",
			level: logrus.InfoLevel,
			log:   func(l *logrus.Logger) { l.Debug("quiet") },
			want:  nil,
		},
		{
			name:  "debug at debug level",
			level: logrus.DebugLevel,
			log:   func(l *logrus.Logger) { l.Debug("loud") },
			want:  []string{`"level"=4 "msg"="loud"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			sink := funcr.New(func(prefix, args string) { got = append(got, args) }, funcr.Options{Verbosity: 5})
			tt.log(ToLogr(sink, tt.level))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}
