package redisconn

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DialFunc is the shape of redis.Options.Dialer.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// conn checks every byte read from the server before the client sees it.
type conn struct {
	net.Conn
	mu sync.Mutex // Read is not called concurrently by go-redis; this makes sure
	v  *Validator
}

// Bound wraps c so that its Read fails with an error matching ErrProtocol,
// returning none of the bytes just read, as soon as the server's replies
// leave lim: the client never sees a header it would allocate too much for.
func Bound(c net.Conn, lim Limits) net.Conn {
	return &conn{Conn: c, v: NewValidator(lim)}
}

func (c *conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.v.Feed(nil); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if verr := c.v.Feed(p[:n]); verr != nil {
		// Closed so that nothing more is read from a server that lies.
		_ = c.Close()
		return 0, verr
	}
	return n, err
}

// Dialer returns a dialer for redis.Options.Dialer that connects over TCP
// within timeout, talks TLS with tlsConfig when it is set (the server name
// taken from addr when the configuration has none), and bounds replies by
// lim.
func Dialer(timeout time.Duration, tlsConfig *tls.Config, lim Limits) DialFunc {
	return Wrap(plainDialer(timeout, tlsConfig), lim)
}

func plainDialer(timeout time.Duration, tlsConfig *tls.Config) DialFunc {
	nd := &net.Dialer{Timeout: timeout}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if tlsConfig == nil {
			return nd.DialContext(ctx, network, addr)
		}
		td := &tls.Dialer{NetDialer: nd, Config: tlsConfig}
		return td.DialContext(ctx, network, addr)
	}
}

// Wrap bounds the replies read from the connections dial makes.
func Wrap(dial DialFunc, lim Limits) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Bound(c, lim), nil
	}
}

// NewClient is redis.NewClient with every reply bounded by lim: opts.Dialer
// is wrapped, or when nil a dialer honouring DialTimeout and TLSConfig as
// go-redis's own does.
func NewClient(opts redis.Options, lim Limits) *redis.Client {
	dial := opts.Dialer
	if dial == nil {
		dial = plainDialer(opts.DialTimeout, opts.TLSConfig)
	}
	opts.Dialer = Wrap(dial, lim)
	return redis.NewClient(&opts)
}
