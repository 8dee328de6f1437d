package logbridge

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
)

// GoRedis makes go-redis (the client of --redis-roles) write its package
// log through log instead of its own stderr logger, at warn level with
// component=go-redis. go-redis logs with Printf and no level; what it
// prints at its default log level (errors) are failed dials, bad
// connections and cluster failovers — worth a warning, while the error that
// matters reaches regosched's own code as a returned error and is logged
// there.
func GoRedis(log logrus.FieldLogger) {
	redis.SetLogger(goRedisLogger{log: log.WithField("component", "go-redis")})
}

// goRedisLogger is go-redis's Logging interface over logrus.
type goRedisLogger struct{ log logrus.FieldLogger }

func (l goRedisLogger) Printf(_ context.Context, format string, args ...any) {
	l.log.Warn(strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}
