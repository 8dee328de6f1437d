package localredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/test/localcluster"
)

const (
	// createTimeout bounds `redis-cli --cluster create`, which waits forever
	// for a cluster that cannot join; here it takes a few seconds.
	createTimeout = time.Minute
	// formTimeout bounds the wait after create until every node agrees and
	// every replica has synced.
	formTimeout = time.Minute
)

// Cluster is a running Redis Cluster on 127.0.0.1.
type Cluster struct {
	log      logrus.FieldLogger
	servers  group
	stopOnce sync.Once
}

// Node is one cluster node as it is at the time of the call.
type Node struct {
	// Port is where the node serves clients on 127.0.0.1; its cluster bus
	// port is Port+10000.
	Port int
	// ID is the cluster node id, which stays with the node across failovers.
	ID string
	// Role is RoleMaster or RoleReplica, as ROLE says.
	Role string
	// MasterPort is the port of a replica's master; 0 for a master.
	MasterPort int
}

// StartCluster starts masters*(1+replicasPerMaster) cluster nodes, joins
// them with `redis-cli --cluster create`, and returns once every node says
// cluster_state:ok, agrees on every node's role, and every replica's link to
// its master is up. On error nothing is left running.
func StartCluster(ctx context.Context, opts Options, masters, replicasPerMaster int) (_ *Cluster, err error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.TLS != nil {
		return nil, errors.New("localredis: TLS is for StartReplication only (redis-cli --cluster create would need it too)")
	}
	if masters < 3 || replicasPerMaster < 0 {
		return nil, fmt.Errorf("localredis: a cluster needs at least 3 masters and no negative replica count, got %d masters, %d replicas per master",
			masters, replicasPerMaster)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH (Debian: apt-get install redis-server): %w", err)
	}
	log := opts.logger()
	c := &Cluster{log: log}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	start := time.Now()
	n := masters * (1 + replicasPerMaster)
	for i := range n {
		s, err := startServer(ctx, &opts, log, fmt.Sprintf("node-%02d", i+1), true, 0)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, s)
		if s.id, err = s.client.Do(ctx, "CLUSTER", "MYID").Text(); err != nil {
			return nil, fmt.Errorf("CLUSTER MYID on port %d: %w", s.port, err)
		}
	}
	started := time.Since(start)

	if err := c.create(ctx, cli, opts, replicasPerMaster); err != nil {
		return nil, err
	}
	created := time.Since(start)

	wantShape := func(nodes []Node) string {
		replicas := map[int]int{} // by master port
		for _, n := range nodes {
			if n.Role == RoleMaster {
				replicas[n.Port] = 0 // counted even without replicas
			}
		}
		for _, n := range nodes {
			if n.Role == RoleReplica {
				replicas[n.MasterPort]++
			}
		}
		if len(replicas) != masters {
			return fmt.Sprintf("%d masters, want %d", len(replicas), masters)
		}
		for port, got := range replicas {
			if got != replicasPerMaster {
				return fmt.Sprintf("master %d has %d replicas, want %d", port, got, replicasPerMaster)
			}
		}
		return ""
	}
	what := fmt.Sprintf("a cluster of %d masters with %d replicas each on ports %v to settle", masters, replicasPerMaster, c.Ports())
	if err := poll(ctx, log, formTimeout, pollInterval, what, c.settled(wantShape)); err != nil {
		return nil, err
	}
	log.WithFields(logrus.Fields{
		"ports":   c.Ports(),
		"started": started.Round(time.Millisecond),
		"created": created.Round(time.Millisecond),
		"formed":  time.Since(start).Round(time.Millisecond),
	}).Info("redis cluster formed")
	return c, nil
}

// create runs `redis-cli --cluster create` under createTimeout, keeping its
// output in Dir/cluster-create.log.
func (c *Cluster) create(ctx context.Context, cli string, opts Options, replicasPerMaster int) error {
	args := []string{"--cluster", "create"}
	for _, s := range c.servers {
		args = append(args, addr(s.port))
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")

	runCtx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	// redis-cli buffers its output in a pipe, so a hung or killed create
	// would say nothing; stdbuf (coreutils) makes it line-buffered.
	path, argv := cli, args
	if stdbuf, err := exec.LookPath("stdbuf"); err == nil {
		path, argv = stdbuf, append([]string{"-oL", "-eL", cli}, args...)
	}
	cmd := exec.CommandContext(runCtx, path, argv...)
	cmd.Dir = opts.Dir
	cmd.SysProcAttr = localcluster.ChildSysProcAttr()
	cmd.Cancel = func() error { return localcluster.KillGroup(cmd.Process.Pid) }
	cmd.WaitDelay = 5 * time.Second
	// REDISCLI_AUTH rather than -a, which makes redis-cli warn about
	// passwords on command lines.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "REDISCLI_AUTH=") || strings.HasPrefix(kv, "TERM=")
	})
	// Without an xterm TERM, redis-cli writes no color codes into the log.
	cmd.Env = append(cmd.Env, "TERM=dumb")
	if opts.Password != "" {
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+opts.Password)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	c.log.WithField("args", strings.Join(args, " ")).Debug("running redis-cli")
	runErr := cmd.Run()
	logPath := filepath.Join(opts.Dir, "cluster-create.log")
	if err := os.WriteFile(logPath, out.Bytes(), 0o644); err != nil {
		c.log.WithError(err).Warn("saving redis-cli output")
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("redis-cli --cluster create: %w; end of %s:\n%s", ctx.Err(), logPath, lastLines(out.String(), 20))
	case runCtx.Err() != nil:
		return fmt.Errorf("redis-cli --cluster create: did not finish within %s (it waits forever for a cluster that cannot join); end of %s:\n%s",
			createTimeout, logPath, lastLines(out.String(), 20))
	case runErr != nil:
		return fmt.Errorf("redis-cli --cluster create: %w; end of %s:\n%s", runErr, logPath, lastLines(out.String(), 20))
	}
	return nil
}

// settled returns a check that every node is up and says cluster_state:ok,
// knows every other node and no stranger, sees every node in the role ROLE
// gives it (with the right master, no fail/handshake flags, link connected),
// that every replica's link to its master is up, and that shape (which
// returns what is wrong, or "") accepts the roles.
func (c *Cluster) settled(shape func([]Node) string) checkFunc {
	return func(ctx context.Context) (string, bool, error) {
		if err := c.servers.dead(); err != nil {
			return "", false, err
		}
		nodes, err := c.Nodes(ctx)
		if err != nil {
			return err.Error(), false, nil
		}
		if msg := shape(nodes); msg != "" {
			return fmt.Sprintf("%s (nodes %v)", msg, nodes), false, nil
		}
		for _, s := range c.servers {
			info, err := s.client.ClusterInfo(ctx).Result()
			if err != nil {
				return fmt.Sprintf("CLUSTER INFO on port %d: %v", s.port, err), false, nil
			}
			if state := infoField(info, "cluster_state"); state != "ok" {
				return fmt.Sprintf("port %d: cluster_state:%s", s.port, state), false, nil
			}
			if known := infoField(info, "cluster_known_nodes"); known != strconv.Itoa(len(c.servers)) {
				return fmt.Sprintf("port %d: cluster_known_nodes:%s, want %d", s.port, known, len(c.servers)), false, nil
			}
		}
		for i, n := range nodes {
			if n.Role != RoleReplica {
				continue
			}
			s, _ := c.servers.byPort(n.Port)
			link, err := s.info(ctx, "replication", "master_link_status")
			if err != nil {
				return err.Error(), false, nil
			}
			if link != "up" {
				return fmt.Sprintf("replica %d of %d: master_link_status:%s", n.Port, nodes[i].MasterPort, link), false, nil
			}
		}
		for _, s := range c.servers {
			text, err := s.client.ClusterNodes(ctx).Result()
			if err != nil {
				return fmt.Sprintf("CLUSTER NODES on port %d: %v", s.port, err), false, nil
			}
			if msg := viewMismatch(text, nodes); msg != "" {
				return fmt.Sprintf("CLUSTER NODES on port %d: %s", s.port, msg), false, nil
			}
		}
		return "settled", true, nil
	}
}

// viewMismatch compares one node's CLUSTER NODES reply with the roles every
// node reports of itself, and returns the first difference, or "".
func viewMismatch(text string, nodes []Node) string {
	lines := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return fmt.Sprintf("malformed line %q", line)
		}
		lines[f[0]] = f
	}
	if len(lines) != len(nodes) {
		return fmt.Sprintf("lists %d nodes, want %d", len(lines), len(nodes))
	}
	idOf := map[int]string{}
	for _, n := range nodes {
		idOf[n.Port] = n.ID
	}
	for _, n := range nodes {
		f, ok := lines[n.ID]
		if !ok {
			return fmt.Sprintf("node %d (%s) missing", n.Port, n.ID)
		}
		flags := strings.Split(f[2], ",")
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if slices.Contains(flags, bad) {
				return fmt.Sprintf("node %d flagged %s", n.Port, f[2])
			}
		}
		if !slices.Contains(flags, n.Role) {
			return fmt.Sprintf("node %d flagged %s, but ROLE there says %s", n.Port, f[2], n.Role)
		}
		wantMaster := "-"
		if n.Role == RoleReplica {
			wantMaster = idOf[n.MasterPort]
		}
		if f[3] != wantMaster {
			return fmt.Sprintf("node %d replicates %s, but ROLE there says master port %d (%s)", n.Port, f[3], n.MasterPort, wantMaster)
		}
		if f[7] != "connected" {
			return fmt.Sprintf("node %d link %s", n.Port, f[7])
		}
	}
	return ""
}

// Ports returns every node's client port, in start order.
func (c *Cluster) Ports() []int { return c.servers.ports() }

// Nodes asks every node for its role with ROLE and returns them sorted by
// port, so that callers see roles after failovers, not as created.
func (c *Cluster) Nodes(ctx context.Context) ([]Node, error) {
	nodes := make([]Node, 0, len(c.servers))
	for _, s := range c.servers {
		role, master, err := s.role(ctx)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, Node{Port: s.port, ID: s.id, Role: role, MasterPort: master})
	}
	slices.SortFunc(nodes, func(a, b Node) int { return a.Port - b.Port })
	return nodes, nil
}

// Role returns RoleMaster or RoleReplica, as ROLE on the node at port says.
func (c *Cluster) Role(ctx context.Context, port int) (string, error) {
	return c.servers.role(ctx, port)
}

// MasterOf returns the port of the master of the replica at replicaPort, as
// ROLE there says; it is an error if that node is a master.
func (c *Cluster) MasterOf(ctx context.Context, replicaPort int) (int, error) {
	return c.servers.masterOf(ctx, replicaPort)
}

// Failover runs CLUSTER FAILOVER on the replica at replicaPort and waits (at
// most 15 s) until it is a master, its old master is its replica with the
// link up, and every node agrees: the cluster is settled again, so another
// Failover may follow at once.
func (c *Cluster) Failover(ctx context.Context, replicaPort int) error {
	s, err := c.servers.byPort(replicaPort)
	if err != nil {
		return err
	}
	role, oldMaster, err := s.role(ctx)
	if err != nil {
		return err
	}
	if role != RoleReplica {
		return fmt.Errorf("failover on port %d: ROLE says %q, want %q", replicaPort, role, RoleReplica)
	}
	start := time.Now()
	if err := s.client.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		return fmt.Errorf("CLUSTER FAILOVER on port %d: %w", replicaPort, err)
	}
	flipped := func(nodes []Node) string {
		for _, n := range nodes {
			switch {
			case n.Port == replicaPort && n.Role != RoleMaster:
				return fmt.Sprintf("%d is still %s of %d", n.Port, n.Role, n.MasterPort)
			case n.Port == oldMaster && (n.Role != RoleReplica || n.MasterPort != replicaPort):
				return fmt.Sprintf("old master %d is %s (master port %d), want replica of %d", n.Port, n.Role, n.MasterPort, replicaPort)
			}
		}
		return ""
	}
	what := fmt.Sprintf("replica %d to take over from master %d", replicaPort, oldMaster)
	if err := poll(ctx, c.log, roleChangeTimeout, pollInterval, what, c.settled(flipped)); err != nil {
		return err
	}
	c.log.WithFields(logrus.Fields{
		"master": replicaPort, "replica": oldMaster, "took": time.Since(start).Round(time.Millisecond),
	}).Info("redis cluster failover done")
	return nil
}

// WaitSettled returns once every node is up, says cluster_state:ok, agrees
// on every node's role, and every replica's link to its master is up, as
// after Failover; it gives up after 15 s.
func (c *Cluster) WaitSettled(ctx context.Context) error {
	anyShape := func([]Node) string { return "" }
	return poll(ctx, c.log, roleChangeTimeout, pollInterval, "the cluster to settle", c.settled(anyShape))
}

// Stop kills every node and waits for them to exit. It is safe to call more
// than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(c.servers.stop)
}
