package bundles

import (
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/sirupsen/logrus"
)

// opaLogger passes the OPA downloader's and client's logs to logrus.
type opaLogger struct {
	log    logrus.FieldLogger
	fields map[string]any
}

func (l opaLogger) entry() logrus.FieldLogger { return l.log.WithFields(l.fields) }

func (l opaLogger) Debug(f string, a ...any) { l.entry().Debugf(f, a...) }
func (l opaLogger) Info(f string, a ...any)  { l.entry().Infof(f, a...) }
func (l opaLogger) Warn(f string, a ...any)  { l.entry().Warnf(f, a...) }

// Error is logged at warning level: what OPA reports as an error here
// (a failed download) is reported by the Remote itself.
func (l opaLogger) Error(f string, a ...any) { l.entry().Warnf(f, a...) }

func (l opaLogger) WithFields(f map[string]any) logging.Logger {
	m := make(map[string]any, len(l.fields)+len(f))
	for k, v := range l.fields {
		m[k] = v
	}
	for k, v := range f {
		m[k] = v
	}
	return opaLogger{log: l.log, fields: m}
}

// GetLevel is Info: OPA's debug-only work (dumping responses) stays off.
func (opaLogger) GetLevel() logging.Level { return logging.Info }
func (opaLogger) SetLevel(logging.Level)  {}
