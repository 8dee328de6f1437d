package repair

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/redis/redisroles"
)

// Redis reaches the Redis of a pod (redisroles.Controller.Dial): the same
// address, password and TLS as the role reads, every reply bounded.
type Redis interface {
	Dial(ctx context.Context, namespace, name string, uid types.UID) (*redis.Client, error)
}

// info is an INFO section as fields.
type info map[string]string

// parseInfo reads "key:value" lines; comments and blank lines are skipped.
func parseInfo(s string) info {
	out := info{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

func (i info) int(key string) (int64, bool) {
	n, err := strconv.ParseInt(i[key], 10, 64)
	return n, err == nil
}

// live is what one Redis server says at the time of a check.
type live struct {
	role        redisroles.Observation
	replication info
	// cluster is CLUSTER INFO; empty outside cluster mode.
	cluster info
	// nodeTimeout is its cluster-node-timeout; 0 when CONFIG GET is
	// refused (renamed or forbidden by ACL).
	nodeTimeout time.Duration
}

// maxNodeTimeout caps the cluster-node-timeout a server reports.
const maxNodeTimeout = 30 * time.Minute

// defaultNodeTimeout is Redis's cluster-node-timeout when it cannot be read.
const defaultNodeTimeout = 15 * time.Second

// voteWindow is how long after a failover of a shard the masters of a
// Redis Cluster refuse their vote to another failover of the same master
// (twice cluster-node-timeout, in Redis's clusterSendFailoverAuthIfNeeded):
// a graceful CLUSTER FAILOVER sent within it is silently given up. A second
// more keeps clear of the edge.
func (l live) voteWindow() time.Duration {
	t := l.nodeTimeout
	if t <= 0 {
		t = defaultNodeTimeout
	}
	return 2*t + time.Second
}

// ask reads the role, INFO replication and, in cluster mode, CLUSTER INFO
// and cluster-node-timeout of one pod's Redis.
func ask(ctx context.Context, r Redis, p *model.Pod) (live, error) {
	c, err := r.Dial(ctx, p.Namespace, p.Name, p.UID)
	if err != nil {
		return live{}, err
	}
	defer func() { _ = c.Close() }()
	obs, err := redisroles.Probe(ctx, c)
	if err != nil {
		return live{}, fmt.Errorf("asking %s for its role: %w", p.Key(), err)
	}
	repl, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return live{}, fmt.Errorf("INFO replication of %s: %w", p.Key(), err)
	}
	l := live{role: obs, replication: parseInfo(repl), cluster: info{}}
	// Probe has read INFO cluster already: a shard means cluster mode, whose
	// state and slot coverage are in CLUSTER INFO.
	if obs.Shard != "" {
		ci, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return live{}, fmt.Errorf("CLUSTER INFO of %s: %w", p.Key(), err)
		}
		l.cluster = parseInfo(ci)
		if kv, err := c.ConfigGet(ctx, "cluster-node-timeout").Result(); err == nil {
			// A server's word, bounded: a hostile one delays only its own
			// cluster's repairs, and by an hour at most.
			if ms, err := strconv.ParseInt(kv["cluster-node-timeout"], 10, 64); err == nil && ms > 0 {
				l.nodeTimeout = time.Duration(min(ms, maxNodeTimeout.Milliseconds())) * time.Millisecond
			}
		}
	}
	return l, nil
}

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// clusterHealthy says why the cluster, as node l sees it, may not take a
// failover now, or "" when it may: state ok and every slot served by a
// node that is not failing.
func clusterHealthy(l live) string {
	c := l.cluster
	if c["cluster_state"] != "ok" {
		return fmt.Sprintf("cluster_state is %q, not ok", c["cluster_state"])
	}
	assigned, ok1 := c.int("cluster_slots_assigned")
	okSlots, ok2 := c.int("cluster_slots_ok")
	if !ok1 || !ok2 {
		return "CLUSTER INFO lacks cluster_slots_assigned or cluster_slots_ok"
	}
	if assigned != slotCount || okSlots != slotCount {
		return fmt.Sprintf("%d of %d slots assigned and %d served by healthy nodes: not all slots are covered", assigned, slotCount, okSlots)
	}
	return ""
}

// inSync says why replica may not take over from master now, or "" when
// it may: its link to the master is up and it is at most maxLag bytes of
// replication stream behind.
func inSync(replica, master live, maxLag int64) string {
	r := replica.replication
	if r["role"] != "slave" {
		return fmt.Sprintf("INFO replication says role %q, not a replica", r["role"])
	}
	if r["master_link_status"] != "up" {
		return fmt.Sprintf("its link to the master is %q, not up", r["master_link_status"])
	}
	if r["master_sync_in_progress"] == "1" {
		return "a full sync from the master is in progress"
	}
	got, ok1 := r.int("slave_repl_offset")
	want, ok2 := master.replication.int("master_repl_offset")
	if !ok1 || !ok2 {
		return "INFO replication lacks slave_repl_offset or the master's master_repl_offset"
	}
	if lag := want - got; lag > maxLag {
		return fmt.Sprintf("it is %d bytes behind its master, more than %d", lag, maxLag)
	}
	return ""
}

// failover sends the graceful CLUSTER FAILOVER to a replica: the replica
// and its master agree on the offset first, so no acknowledged write is
// lost; FORCE and TAKEOVER are never sent.
func failover(ctx context.Context, r Redis, replica *model.Pod) error {
	c, err := r.Dial(ctx, replica.Namespace, replica.Name, replica.UID)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.ClusterFailover(ctx).Err(); err != nil {
		return fmt.Errorf("CLUSTER FAILOVER on %s: %w", replica.Key(), err)
	}
	return nil
}
