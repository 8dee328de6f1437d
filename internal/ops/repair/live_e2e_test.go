//go:build e2e

package repair

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/redis/redisconn"
	"github.com/regosched/regosched/internal/redis/redisroles"
	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localredis"
)

// loopback reaches the Redis whose port is the pod's name, on 127.0.0.1,
// through the bounded reader as the controller's clients do.
type loopback struct{}

func (loopback) Dial(_ context.Context, _, name string, _ types.UID) (*redis.Client, error) {
	return redisconn.NewClient(redis.Options{Addr: "127.0.0.1:" + name, Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second}, redisconn.Limits{}), nil
}

// The checks before a failover read what a real Redis Cluster says: a
// healthy cluster and an in-sync replica pass; a replica behind its
// master, and a cluster whose master is gone (cluster_state:fail, the
// replica's link down), refuse.
func TestLiveChecksOnARealCluster(t *testing.T) {
	ctx := t.Context()
	c, err := localredis.StartCluster(ctx, localredis.Options{Dir: t.TempDir()}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var replica, master int
	for _, n := range nodes {
		if n.Role == localredis.RoleReplica {
			replica, master = n.Port, n.MasterPort
			break
		}
	}

	lr, err := ask(ctx, loopback{}, fixture.MakePod().Namespace("redis").Name(strconv.Itoa(replica)).UID("").Model())
	if err != nil {
		t.Fatal(err)
	}
	lm, err := ask(ctx, loopback{}, fixture.MakePod().Namespace("redis").Name(strconv.Itoa(master)).UID("").Model())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("healthy and in sync", func(t *testing.T) {
		if lr.role.Role != redisroles.Replica || lm.role.Role != redisroles.Master || lr.role.Shard != lm.role.Shard {
			t.Errorf("roles: replica %+v, master %+v; want a replica of the master's shard", lr.role, lm.role)
		}
		if why := clusterHealthy(lr); why != "" {
			t.Errorf("clusterHealthy() = %q, want \"\"", why)
		}
		if why := inSync(lr, lm, 0); why != "" {
			t.Errorf("inSync() = %q, want \"\"", why)
		}
		if lr.nodeTimeout != 5*time.Second || lr.voteWindow() != 11*time.Second {
			t.Errorf("node timeout %s, vote window %s; want 5s (localredis) and 11s", lr.nodeTimeout, lr.voteWindow())
		}
	})

	t.Run("a replica behind its master", func(t *testing.T) {
		// The master takes 100 KiB of writes after the replica was read:
		// the offsets compare as the stream's bytes.
		keys := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(master)})
		defer keys.Close()
		tag := tagOn(t, ctx, keys, master)
		for i := 0; i < 100; i++ {
			if err := keys.Set(ctx, fmt.Sprintf("{%s}:%d", tag, i), strings.Repeat("x", 1024), 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		later, err := ask(ctx, loopback{}, fixture.MakePod().Namespace("redis").Name(strconv.Itoa(master)).UID("").Model())
		if err != nil {
			t.Fatal(err)
		}
		if why := inSync(lr, later, 64<<10); !strings.Contains(why, "bytes behind its master") {
			t.Errorf("inSync() = %q, want it behind by more than 64 KiB", why)
		}
	})

	t.Run("the master gone", func(t *testing.T) {
		// Kept from taking over, the replica sees its link down and the
		// cluster fail once the master is marked failing (node timeout 5 s).
		rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(replica)})
		defer rc.Close()
		if err := rc.ConfigSet(ctx, "cluster-replica-no-failover", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		mc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(master)})
		_ = mc.Do(ctx, "SHUTDOWN", "NOSAVE").Err() // the connection drops: no reply
		_ = mc.Close()
		var got live
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := ask(ctx, loopback{}, fixture.MakePod().Namespace("redis").Name(strconv.Itoa(replica)).UID("").Model())
			got = l
			// Within the node timeout the cluster does not know yet (the
			// replica's link, and the master's silence, refuse then); a
			// failing master then costs its slots (cluster_slots_ok), and,
			// marked failed, the cluster its state.
			return err == nil && l.cluster["cluster_state"] == "fail", nil
		})
		if err != nil {
			t.Fatalf("cluster state never failed: %v", got.cluster)
		}
		if why := clusterHealthy(got); !strings.Contains(why, `cluster_state is "fail"`) {
			t.Errorf("clusterHealthy() = %q, want cluster_state fail", why)
		}
		if why := inSync(got, lm, 1<<30); !strings.Contains(why, "link to the master is") {
			t.Errorf("inSync() = %q, want the link down", why)
		}
	})
}

// tagOn returns a hash tag whose slot the master at port serves, so that
// every key "{tag}..." is written to it.
func tagOn(t *testing.T, ctx context.Context, c *redis.Client, port int) string {
	t.Helper()
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var mine []redis.SlotRange
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Port == int64(port) && n.Role == "master" {
				mine = sh.Slots
			}
		}
	}
	for j := 0; j < 100000; j++ {
		tag := fmt.Sprintf("k%d", j)
		slot, err := c.ClusterKeySlot(ctx, tag).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range mine {
			if r.Start <= slot && slot <= r.End {
				return tag
			}
		}
	}
	t.Fatalf("no key found in the slots of port %d", port)
	return ""
}
