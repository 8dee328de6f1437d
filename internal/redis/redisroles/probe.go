// Package redisroles reads the role of each Redis pod from Redis itself
// (ROLE, and CLUSTER NODES in cluster mode) and writes it onto the pod as
// labels, so that placement rules follow failovers instead of the labels a
// chart gave the pod at its first start.
package redisroles

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/regosched/regosched/internal/redis/redisconn"
)

// Roles as written on pods.
const (
	Master  = "master"
	Replica = "replica"
)

// Observation is what one Redis server says of itself. Shard is empty
// outside cluster mode: replication has one shard per cluster.
type Observation struct {
	Role  string
	Shard string
}

// Probe asks the Redis server behind c for its role and, in cluster mode,
// its shard.
func Probe(ctx context.Context, c *redis.Client) (Observation, error) {
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		return Observation{}, fmt.Errorf("INFO cluster: %w", err)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		nodes, err := c.ClusterNodes(ctx).Result()
		if err != nil {
			return Observation{}, fmt.Errorf("CLUSTER NODES: %w", err)
		}
		return fromClusterNodes(nodes)
	}
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return Observation{}, fmt.Errorf("ROLE: %w", err)
	}
	if len(role) == 0 {
		return Observation{}, protocolError("ROLE: empty reply")
	}
	switch name, _ := role[0].(string); name {
	case "master":
		return Observation{Role: Master}, nil
	case "slave":
		return Observation{Role: Replica}, nil
	default:
		return Observation{}, protocolError(fmt.Sprintf("ROLE: %q is not a data node's role", name))
	}
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, master string
	myself     bool
	isMaster   bool
	slots      []int // first slot of each range, as listed
}

// fromClusterNodes finds the "myself" line of a CLUSTER NODES reply and
// names its shard.
//
// A shard's id must survive a failover, when the replica takes over its
// master's slots and node ids swap roles: so it is named after the lowest
// slot its master serves ("slot-0"), which moves with the shard, not with a
// node. A master without slots (new, or emptied by a reshard) is named
// after its node id ("node-<first 12 of the id>"). A reshard that moves a
// master's lowest slot renames its shard; the labels follow on the next check.
func fromClusterNodes(reply string) (Observation, error) {
	byID := map[string]*clusterNode{}
	var me *clusterNode
	for _, line := range strings.Split(strings.TrimSpace(reply), "\n") {
		n, err := parseClusterNode(line)
		if err != nil {
			return Observation{}, err
		}
		byID[n.id] = n
		if n.myself {
			me = n
		}
	}
	if me == nil {
		return Observation{}, protocolError("CLUSTER NODES: no line is flagged myself")
	}
	if me.isMaster {
		return Observation{Role: Master, Shard: shardOf(me)}, nil
	}
	m := byID[me.master]
	if m == nil {
		return Observation{}, protocolError(fmt.Sprintf("CLUSTER NODES: the master %q of this replica is not listed", me.master))
	}
	return Observation{Role: Replica, Shard: shardOf(m)}, nil
}

func shardOf(master *clusterNode) string {
	if len(master.slots) == 0 {
		id := master.id
		if len(id) > 12 {
			id = id[:12]
		}
		return "node-" + id
	}
	lowest := master.slots[0]
	for _, s := range master.slots[1:] {
		lowest = min(lowest, s)
	}
	return "slot-" + strconv.Itoa(lowest)
}

// parseClusterNode reads "<id> <addr> <flags> <master> <ping> <pong>
// <epoch> <link> <slot>...". Slots being imported or migrated ("[...]")
// are not the node's yet, or still are: they are left out.
func parseClusterNode(line string) (*clusterNode, error) {
	f := strings.Fields(line)
	if len(f) < 8 {
		return nil, protocolError(fmt.Sprintf("CLUSTER NODES: short line %q", line))
	}
	n := &clusterNode{id: f[0], master: f[3]}
	for _, flag := range strings.Split(f[2], ",") {
		switch flag {
		case "myself":
			n.myself = true
		case "master":
			n.isMaster = true
		}
	}
	for _, s := range f[8:] {
		if strings.HasPrefix(s, "[") {
			continue
		}
		first, _, _ := strings.Cut(s, "-")
		slot, err := strconv.Atoi(first)
		if err != nil || slot < 0 || slot > 16383 {
			return nil, protocolError(fmt.Sprintf("CLUSTER NODES: bad slot %q in %q", s, line))
		}
		n.slots = append(n.slots, slot)
	}
	return n, nil
}

// errProtocol marks replies that are not what a Redis data node answers.
var errProtocol = errors.New("unexpected reply")

func protocolError(msg string) error { return fmt.Errorf("%w: %s", errProtocol, msg) }

// Reasons for regosched_redis_role_errors_total.
const (
	ReasonUnreachable = "unreachable"
	ReasonAuth        = "auth"
	ReasonProtocol    = "protocol"
	ReasonPassword    = "password"
	ReasonPatch       = "patch"
	ReasonError       = "error"
	// ReasonHostNetwork: the pod shares its node's network, so it is not
	// asked at all (ErrHostNetwork).
	ReasonHostNetwork = "host_network"
)

// reason classifies a probe's failure for the metric.
func reason(err error) string {
	var ne net.Error
	var oe *net.OpError
	msg := err.Error()
	switch {
	case errors.Is(err, ErrHostNetwork):
		return ReasonHostNetwork
	case errors.Is(err, errProtocol), errors.Is(err, redisconn.ErrProtocol):
		return ReasonProtocol
	case strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "WRONGPASS"),
		strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"):
		return ReasonAuth
	case errors.As(err, &oe), errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded):
		return ReasonUnreachable
	default:
		return ReasonError
	}
}
