package localredis

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Replication is a running Redis master with replicas on 127.0.0.1,
// without cluster mode (as with Sentinel-managed or chart-managed
// replication).
type Replication struct {
	log      logrus.FieldLogger
	servers  group
	stopOnce sync.Once
}

// StartReplication starts a master and that many replicas with replicaof
// pointing at it, and returns once every replica's link is up and the master
// counts them all. On error nothing is left running.
func StartReplication(ctx context.Context, opts Options, replicas int) (_ *Replication, err error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if replicas < 0 {
		return nil, fmt.Errorf("localredis: negative replica count %d", replicas)
	}
	log := opts.logger()
	r := &Replication{log: log}
	defer func() {
		if err != nil {
			r.Stop()
		}
	}()

	start := time.Now()
	master, err := startServer(ctx, &opts, log, "master", false, 0)
	if err != nil {
		return nil, err
	}
	r.servers = append(r.servers, master)
	for i := range replicas {
		s, err := startServer(ctx, &opts, log, fmt.Sprintf("replica-%02d", i+1), false, master.port)
		if err != nil {
			return nil, err
		}
		r.servers = append(r.servers, s)
	}
	what := fmt.Sprintf("%d replicas %v to sync from master %d", replicas, r.Ports()[1:], master.port)
	if err := poll(ctx, log, formTimeout, pollInterval, what, r.settled(master.port)); err != nil {
		return nil, err
	}
	log.WithFields(logrus.Fields{
		"ports": r.Ports(), "took": time.Since(start).Round(time.Millisecond),
	}).Info("redis replication started")
	return r, nil
}

// settled returns a check that the server on masterPort says master and
// counts every other server as a connected replica, and every other server
// replicates from it with the link up.
func (r *Replication) settled(masterPort int) checkFunc {
	return func(ctx context.Context) (string, bool, error) {
		if err := r.servers.dead(); err != nil {
			return "", false, err
		}
		for _, s := range r.servers {
			role, master, err := s.role(ctx)
			if err != nil {
				return err.Error(), false, nil
			}
			if s.port == masterPort {
				if role != RoleMaster {
					return fmt.Sprintf("%d is %s of %d, want master", s.port, role, master), false, nil
				}
				n, err := s.info(ctx, "replication", "connected_slaves")
				if err != nil {
					return err.Error(), false, nil
				}
				if n != strconv.Itoa(len(r.servers)-1) {
					return fmt.Sprintf("master %d: connected_slaves:%s, want %d", s.port, n, len(r.servers)-1), false, nil
				}
				continue
			}
			if role != RoleReplica || master != masterPort {
				return fmt.Sprintf("%d is %s (master port %d), want replica of %d", s.port, role, master, masterPort), false, nil
			}
			link, err := s.info(ctx, "replication", "master_link_status")
			if err != nil {
				return err.Error(), false, nil
			}
			if link != "up" {
				return fmt.Sprintf("replica %d: master_link_status:%s", s.port, link), false, nil
			}
		}
		return "settled", true, nil
	}
}

// Ports returns the servers' ports in start order: the first master, then
// the replicas.
func (r *Replication) Ports() []int { return r.servers.ports() }

// Role returns RoleMaster or RoleReplica, as ROLE on the server at port says.
func (r *Replication) Role(ctx context.Context, port int) (string, error) {
	return r.servers.role(ctx, port)
}

// MasterOf returns the port of the master of the replica at replicaPort, as
// ROLE there says; it is an error if that server is a master.
func (r *Replication) MasterOf(ctx context.Context, replicaPort int) (int, error) {
	return r.servers.masterOf(ctx, replicaPort)
}

// Promote makes the server at port the master, as an operator or Sentinel
// would: REPLICAOF NO ONE there, REPLICAOF it on every other server, then it
// waits (at most 15 s) until every replica's link to it is up.
func (r *Replication) Promote(ctx context.Context, port int) error {
	target, err := r.servers.byPort(port)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := target.client.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("REPLICAOF NO ONE on port %d: %w", port, err)
	}
	for _, s := range r.servers {
		if s == target {
			continue
		}
		if err := s.client.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(port)).Err(); err != nil {
			return fmt.Errorf("REPLICAOF 127.0.0.1 %d on port %d: %w", port, s.port, err)
		}
	}
	if err := poll(ctx, r.log, roleChangeTimeout, pollInterval, fmt.Sprintf("every server to replicate from %d", port), r.settled(port)); err != nil {
		return err
	}
	r.log.WithFields(logrus.Fields{
		"master": port, "took": time.Since(start).Round(time.Millisecond),
	}).Info("redis replica promoted")
	return nil
}

// Stop kills every server and waits for them to exit. It is safe to call
// more than once.
func (r *Replication) Stop() {
	r.stopOnce.Do(r.servers.stop)
}
