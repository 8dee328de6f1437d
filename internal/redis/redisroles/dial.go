package redisroles

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/redis/redisconn"
)

var errPassword = errors.New("reading the Redis password")

// probe asks the pod's Redis for its role.
func (c *Controller) probe(ctx context.Context, info *podInfo, src *policy.LiveSource) (Observation, error) {
	client, err := c.client(ctx, info, src)
	if err != nil {
		return Observation{}, err
	}
	defer func() { _ = client.Close() }()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	return Probe(ctx, client)
}

// client is a client of the pod's Redis with its password, one connection,
// no retries, and every reply bounded (redisconn). Every probe and Dial
// comes through here, so a host-networked pod is refused here, before its
// password is read or anything dialed.
func (c *Controller) client(ctx context.Context, info *podInfo, src *policy.LiveSource) (*redis.Client, error) {
	if err := ownNetwork(info); err != nil {
		return nil, err
	}
	user, password, err := c.password(ctx, info)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errPassword, err)
	}
	return redisconn.NewClient(redis.Options{
		Addr:            net.JoinHostPort(info.IP, strconv.Itoa(port(info, src))),
		Username:        user,
		Password:        password,
		TLSConfig:       c.cfg.TLS,
		DialTimeout:     c.cfg.Timeout,
		ReadTimeout:     c.cfg.Timeout,
		WriteTimeout:    c.cfg.Timeout,
		PoolSize:        1,
		MaxRetries:      -1, // one answer or an error: the next check retries
		DialerRetries:   1,
		Protocol:        2,
		DisableIdentity: true,
	}, redisconn.Limits{}), nil
}

// ErrNotReadable is Dial's answer for a pod whose Redis the controller
// would not ask: unknown to its informer (or another incarnation), not
// running, or not read live under the active policy.
var ErrNotReadable = errors.New("not a running Redis pod read live")

// Dial returns a client of the Redis of pod namespace/name, of this UID,
// as the controller reaches it for roles (address, password, TLS, bounded
// replies), for the repair's checks and commands. The caller closes it.
func (c *Controller) Dial(ctx context.Context, namespace, name string, uid types.UID) (*redis.Client, error) {
	obj, ok, err := c.pods.GetStore().GetByKey(namespace + "/" + name)
	pod, isPod := obj.(*corev1.Pod)
	if err != nil || !ok || !isPod || pod.UID != uid {
		return nil, fmt.Errorf("pod %s/%s: %w (unknown to the informer)", namespace, name, ErrNotReadable)
	}
	pol := c.cfg.Policy()
	if pol == nil {
		return nil, fmt.Errorf("pod %s/%s: %w (no policy)", namespace, name, ErrNotReadable)
	}
	info := infoOf(pod)
	if !info.Running || info.IP == "" {
		return nil, fmt.Errorf("pod %s/%s: %w (not running)", namespace, name, ErrNotReadable)
	}
	src := c.source(ctx, pol, pod)
	if src == nil {
		return nil, fmt.Errorf("pod %s/%s: %w (the policy reads no live role)", namespace, name, ErrNotReadable)
	}
	return c.client(ctx, info, src)
}

// port is the pod's container port of the first of src's names, else src's.
func port(info *podInfo, src *policy.LiveSource) int {
	for _, name := range src.PortNames {
		if p, ok := info.Ports[name]; ok {
			return int(p)
		}
	}
	return src.Port
}
