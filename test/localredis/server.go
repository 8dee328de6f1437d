// Package localredis runs real redis-server processes on 127.0.0.1, for
// end-to-end tests: a Redis Cluster (StartCluster) or a master with
// replicas (StartReplication), with ways to move the master role around
// (Cluster.Failover, Replication.Promote) and to read who holds it.
//
// Servers run in the foreground as children of the test, each in its own
// process group and killed by the kernel if the test process dies, so a
// failing or killed test leaves nothing running. Nothing is persisted. Every
// wait is bounded; a timeout says what was expected and what was last seen.
//
// redis-server and redis-cli must be on PATH (Debian: apt-get install
// redis-server; tested with 7.0.15):
//
//	c, err := localredis.StartCluster(ctx, localredis.Options{Dir: t.TempDir(), Log: log}, 3, 1)
//	...
//	t.Cleanup(c.Stop)
package localredis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/test/localcluster"
)

// Roles as ROLE names them.
const (
	RoleMaster  = "master"
	RoleReplica = "slave"
)

// Options configures the servers of a Cluster or a Replication.
type Options struct {
	// Dir receives one folder per server (redis.conf, redis.log, nodes.conf)
	// and must exist; callers pass t.TempDir() so logs live as long as the
	// test's and are cleaned up with it.
	Dir string
	// Password, when set, becomes requirepass and masterauth of every
	// server, so tests can exercise authenticated clients and replication.
	Password string
	// TLS, when set, makes every server listen with TLS only (replication
	// too), for tests of clients that talk TLS; StartReplication only.
	TLS *TLS
	// Log receives progress and child process events; nil discards them.
	Log logrus.FieldLogger
}

// TLS is the servers' side of TLS: their certificate and key, and the CA
// that signs the client certificates they require (Redis's default,
// tls-auth-clients yes). Client is how the harness itself connects.
type TLS struct {
	CertFile, KeyFile, CAFile string
	Client                    *tls.Config
}

const (
	// readyTimeout bounds a server's start until it answers PING; a
	// redis-server with nothing to load answers within milliseconds.
	readyTimeout = 10 * time.Second
	// roleChangeTimeout bounds a failover or a promotion until every
	// server agrees on the new roles; a manual failover takes about 1 s.
	roleChangeTimeout = 15 * time.Second
	// commandTimeout bounds one command, so that a wedged server turns into
	// an error of the poll instead of a hang.
	commandTimeout = 2 * time.Second
	// pollInterval is how often waits for roles look again; each look
	// sends a few commands to every server.
	pollInterval = 100 * time.Millisecond
	// readyPollInterval is how often a starting server is tried: it takes
	// a few milliseconds, and each try is one connect.
	readyPollInterval = 10 * time.Millisecond
	// startAttempts is how often a server is started on new ports when its
	// ports were taken between being checked and being bound.
	startAttempts = 5
)

// Data ports are drawn from 10000–19999 and cluster bus ports are data port
// + 10000 (Redis's default), so 20000–29999: all below Linux's ephemeral
// range (32768+), so that no outgoing connection holds one by chance, and
// data and bus ports can never collide.
const (
	portBase  = 10000
	portSpan  = 10000
	busOffset = 10000
)

// server is one running redis-server.
type server struct {
	name   string
	port   int
	proc   *localcluster.Process
	client *redis.Client
	// id is the cluster node id; empty outside cluster mode.
	id string
}

// logger returns o.Log, or a logger that discards everything.
func (o *Options) logger() logrus.FieldLogger {
	if o.Log != nil {
		return o.Log
	}
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// validate checks what every start needs.
func (o *Options) validate() error {
	if o.Dir == "" {
		return errors.New("localredis: Options.Dir is required (t.TempDir() will do)")
	}
	if strings.ContainsFunc(o.Password, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errors.New("localredis: Options.Password must not contain control characters")
	}
	return nil
}

// tlsClient is how the harness connects: nil without TLS.
func (o *Options) tlsClient() *tls.Config {
	if o.TLS == nil {
		return nil
	}
	return o.TLS.Client
}

// addr is where a server on port listens.
func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// newClient returns a plain (non-cluster) client of one server. RESP2 and no
// CLIENT SETINFO: Redis 7.0 knows neither HELLO-negotiated extras nor
// SETINFO, and the replies read here are the same in both protocols. No
// retries either: the polls retry.
func newClient(port int, password string) *redis.Client {
	return newTLSClient(port, password, nil)
}

// newTLSClient is newClient over TLS when tlsConfig is set.
func newTLSClient(port int, password string, tlsConfig *tls.Config) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:            addr(port),
		Password:        password,
		TLSConfig:       tlsConfig,
		Protocol:        2,
		DisableIdentity: true,
		DialTimeout:     commandTimeout,
		ReadTimeout:     commandTimeout,
		WriteTimeout:    commandTimeout,
		PoolSize:        2,
		MaxRetries:      -1,
	})
}

// portFree reports whether port can be bound on 127.0.0.1 right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", addr(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// pickPort returns a free data port, whose bus port is free too when bus is
// set. It starts at a random place so that concurrent test processes rarely
// race for the same port; servers started earlier hold theirs, so one start
// sequence never picks a port twice.
func pickPort(bus bool) (int, error) {
	start := rand.IntN(portSpan)
	for i := range portSpan {
		p := portBase + (start+i)%portSpan
		if portFree(p) && (!bus || portFree(p+busOffset)) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d–%d (with bus port +%d: %v)", portBase, portBase+portSpan-1, busOffset, bus)
}

// quoteConf quotes s for redis.conf.
func quoteConf(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// serverConfig is the redis.conf of a server on port. Settings live in a
// file rather than on the command line so that the password stays out of
// ps and a failed run can be replayed with `redis-server DIR/redis.conf`.
func serverConfig(dir string, port int, password string, cluster bool, replicaOf int, t *TLS) string {
	listen := []string{"port " + strconv.Itoa(port)}
	if t != nil {
		listen = []string{"port 0", "tls-port " + strconv.Itoa(port),
			"tls-cert-file " + quoteConf(t.CertFile), "tls-key-file " + quoteConf(t.KeyFile),
			"tls-ca-cert-file " + quoteConf(t.CAFile), "tls-replication yes"}
	}
	lines := append([]string{"bind 127.0.0.1"}, listen...)
	lines = append(lines, []string{
		// In the foreground, so that the server is our child and dies with us.
		"daemonize no",
		// To stdout, which the harness sends to redis.log.
		`logfile ""`,
		"dir " + quoteConf(dir),
		// Nothing to persist in a test.
		`save ""`,
		"appendonly no",
		// The default 5 s delay, meant to batch replicas into one diskless
		// transfer, would dominate every start and every resync here.
		"repl-diskless-sync-delay 0",
	}...)
	if password != "" {
		lines = append(lines, "requirepass "+quoteConf(password), "masterauth "+quoteConf(password))
	}
	if cluster {
		lines = append(lines,
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			// 5 s rather than 15 s, so that a test killing a master sees the
			// automatic failover sooner; loopback never loses 5 s of pings.
			"cluster-node-timeout 5000",
		)
	}
	if replicaOf != 0 {
		lines = append(lines, "replicaof 127.0.0.1 "+strconv.Itoa(replicaOf))
	}
	return strings.Join(lines, "\n") + "\n"
}

// startServer starts a redis-server named name in its own folder under
// o.Dir and waits until it answers PING. replicaOf, when not 0, is the port
// of its master. If another process took the port between the check and
// the bind, it starts again on new ports.
func startServer(ctx context.Context, o *Options, log logrus.FieldLogger, name string, cluster bool, replicaOf int) (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (Debian: apt-get install redis-server): %w", err)
	}
	dir := filepath.Join(o.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	confPath := filepath.Join(dir, "redis.conf")
	for attempt := 1; ; attempt++ {
		port, err := pickPort(cluster)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		conf := serverConfig(dir, port, o.Password, cluster, replicaOf, o.TLS)
		if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		// A failed attempt may have left a nodes.conf naming the old port.
		_ = os.Remove(filepath.Join(dir, "nodes.conf"))
		proc, err := localcluster.StartChild(log.WithField("port", port), dir, name, filepath.Join(dir, "redis.log"), bin, confPath)
		if err != nil {
			return nil, err
		}
		s := &server{name: name, port: port, proc: proc, client: newTLSClient(port, o.Password, o.tlsClient())}
		err = s.waitReady(ctx, log)
		if err == nil {
			return s, nil
		}
		s.stop()
		if attempt < startAttempts && strings.Contains(proc.LogTail(20), "Address already in use") {
			log.WithField("port", port).Warnf("%s: port taken before the server bound it; trying other ports", name)
			continue
		}
		return nil, err
	}
}

// waitReady waits until the server accepts connections and answers PING.
// Connecting by hand first keeps go-redis from logging failed dials.
func (s *server) waitReady(ctx context.Context, log logrus.FieldLogger) error {
	var dialer net.Dialer
	return poll(ctx, log, readyTimeout, readyPollInterval, fmt.Sprintf("%s on port %d to answer PING with PONG", s.name, s.port),
		func(ctx context.Context) (string, bool, error) {
			if s.proc.Exited() {
				return "", false, s.proc.ExitError()
			}
			conn, err := dialer.DialContext(ctx, "tcp", addr(s.port))
			if err != nil {
				return err.Error(), false, nil
			}
			_ = conn.Close()
			got, err := s.client.Ping(ctx).Result()
			if err != nil {
				return err.Error(), false, nil
			}
			return got, got == "PONG", nil
		})
}

// stop kills the server and closes its client.
func (s *server) stop() {
	s.proc.Kill()
	_ = s.client.Close()
}

// role asks the server for its role with ROLE and, for a replica, the port
// of its master.
func (s *server) role(ctx context.Context) (role string, masterPort int, err error) {
	reply, err := s.client.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", 0, fmt.Errorf("ROLE on port %d: %w", s.port, err)
	}
	if len(reply) == 0 {
		return "", 0, fmt.Errorf("ROLE on port %d: empty reply", s.port)
	}
	switch name, _ := reply[0].(string); name {
	case RoleMaster:
		return RoleMaster, 0, nil
	case RoleReplica:
		// slave, master ip, master port, link state, offset
		if len(reply) < 3 {
			return "", 0, fmt.Errorf("ROLE on port %d: short replica reply %v", s.port, reply)
		}
		port, ok := reply[2].(int64)
		if !ok {
			return "", 0, fmt.Errorf("ROLE on port %d: master port %v (%T) is not an integer", s.port, reply[2], reply[2])
		}
		return RoleReplica, int(port), nil
	default:
		return "", 0, fmt.Errorf("ROLE on port %d: unexpected role %q", s.port, name)
	}
}

// info returns one field of an INFO section ("" when absent).
func (s *server) info(ctx context.Context, section, field string) (string, error) {
	text, err := s.client.Info(ctx, section).Result()
	if err != nil {
		return "", fmt.Errorf("INFO %s on port %d: %w", section, s.port, err)
	}
	return infoField(text, field), nil
}

// infoField returns the value of field in an INFO or CLUSTER INFO reply.
func infoField(text, field string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), field+":"); ok {
			return v
		}
	}
	return ""
}

// checkFunc looks once at what a poll waits for. It returns what it saw
// (for the timeout error) and whether the wait is over; an error ends the
// wait at once, for things that will not get better, like a dead server.
type checkFunc func(ctx context.Context) (seen string, done bool, err error)

// poll runs check every interval until it is done, it fails, ctx ends or
// limit passes. The error names what was awaited and the last thing seen,
// which is what a failing test needs to be read; each new thing seen is
// logged at debug level, to show where the time went.
func poll(ctx context.Context, log logrus.FieldLogger, limit, interval time.Duration, what string, check checkFunc) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := ""
	for {
		seen, done, err := check(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		if seen != last {
			log.WithField("after", time.Since(start).Round(time.Millisecond)).Debugf("waiting for %s: %s", what, seen)
			last = seen
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: gave up after %s (%w); last seen: %s",
				what, time.Since(start).Round(time.Millisecond), ctx.Err(), seen)
		case <-tick.C:
		}
	}
}

// group is the servers of a Cluster or a Replication.
type group []*server

// byPort returns the server on port.
func (g group) byPort(port int) (*server, error) {
	for _, s := range g {
		if s.port == port {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no server on port %d (ports: %v)", port, g.ports())
}

// ports returns the servers' ports in start order.
func (g group) ports() []int {
	ports := make([]int, len(g))
	for i, s := range g {
		ports[i] = s.port
	}
	return ports
}

// dead returns the exit error of the first server that exited, if any.
func (g group) dead() error {
	for _, s := range g {
		if s.proc.Exited() {
			return s.proc.ExitError()
		}
	}
	return nil
}

// role is Role of a Cluster or a Replication.
func (g group) role(ctx context.Context, port int) (string, error) {
	s, err := g.byPort(port)
	if err != nil {
		return "", err
	}
	role, _, err := s.role(ctx)
	return role, err
}

// masterOf is MasterOf of a Cluster or a Replication.
func (g group) masterOf(ctx context.Context, port int) (int, error) {
	s, err := g.byPort(port)
	if err != nil {
		return 0, err
	}
	role, master, err := s.role(ctx)
	if err != nil {
		return 0, err
	}
	if role != RoleReplica {
		return 0, fmt.Errorf("port %d: ROLE says %q, want %q", port, role, RoleReplica)
	}
	return master, nil
}

// stop kills every server and waits for them.
func (g group) stop() {
	for _, s := range g {
		s.stop()
	}
}
