package localstack

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/test/localcluster"
)

// Container ports of PodRedis's pods, named as Bitnami's redis-cluster
// chart names them; regosched finds a pod's Redis by the first.
const (
	portRedis = "tcp-redis"
	portBus   = "tcp-redis-bus"
)

// podRedisTimeout bounds a server's start and its joining the shard.
const podRedisTimeout = 20 * time.Second

// PodRedis plays the container runtime for the Redis of pods that kwok
// runs: kwok reports them Running with IPs of their own, and PodRedis runs
// a redis-server in cluster mode on each pod's IP, at its container ports,
// as the pod's container would. The servers make a Redis Cluster of one
// shard: the first takes every slot, and every later one meets it and
// replicates it (CLUSTER MEET, CLUSTER REPLICATE), as a pod recreated
// without its old node would rejoin. A pod that is gone or going (its
// deletion started) loses its server, as a kubelet stops the container,
// and its node id is forgotten by the others (CLUSTER FORGET).
type PodRedis struct {
	client   kubernetes.Interface
	ns, sel  string
	dir, bin string
	log      logrus.FieldLogger

	mu      sync.Mutex
	servers map[types.UID]*podServer // guarded by mu
	master  *podServer               // holds the slots; guarded by mu
	err     error                    // the first failure of Run; guarded by mu
}

// podServer is the redis-server of one pod incarnation.
type podServer struct {
	pod    string
	uid    types.UID
	addr   string // podIP:port
	id     string // cluster node id
	proc   *localcluster.Process
	client *redis.Client
	// nodesAtJoin is how many CLUSTER NODES it had served when it joined.
	nodesAtJoin int
}

// NewPodRedis returns the runtime of the pods of ns that match the label
// selector sel; each server gets a folder under dir.
func NewPodRedis(client kubernetes.Interface, ns, sel, dir string, log logrus.FieldLogger) (*PodRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (Debian: apt-get install redis-server): %w", err)
	}
	return &PodRedis{client: client, ns: ns, sel: sel, dir: dir, bin: bin, log: log, servers: map[types.UID]*podServer{}}, nil
}

// PickPodRedisPort returns a port that nothing listens on at any address,
// with its bus port (+10000) free too, for the pods' container port: below
// Linux's ephemeral range, as localredis's ports are.
func PickPodRedisPort() (int, error) {
	free := func(port int) bool {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			return false
		}
		_ = l.Close()
		return true
	}
	start := rand.IntN(10000)
	for i := range 10000 {
		if p := 10000 + (start+i)%10000; free(p) && free(p+10000) {
			return p, nil
		}
	}
	return 0, errors.New("no free port pair in 10000–19999 (+10000)")
}

// Run syncs the servers with the pods every 100 ms until ctx ends; the
// first failure is kept for Err and stops it.
func (r *PodRedis) Run(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := r.sync(ctx)
		if err != nil && ctx.Err() == nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			r.log.WithError(err).Error("pod Redis: giving up")
			return true, nil
		}
		return false, nil
	})
}

// Err is the failure that stopped Run, if any.
func (r *PodRedis) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Server returns the address (podIP:port) and cluster node id of the
// server of pod incarnation uid; ok is false while it has none.
func (r *PodRedis) Server(uid types.UID) (addr, id string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[uid]
	if !ok {
		return "", "", false
	}
	return s.addr, s.id, true
}

// Replicating reports whether the server of pod incarnation uid is a
// replica whose link to its master is up (ROLE says connected).
func (r *PodRedis) Replicating(ctx context.Context, uid types.UID) bool {
	r.mu.Lock()
	s, ok := r.servers[uid]
	r.mu.Unlock()
	if !ok {
		return false
	}
	role, err := s.client.Do(ctx, "ROLE").Slice()
	return err == nil && len(role) >= 4 && role[0] == "slave" && role[3] == "connected"
}

// AskedSinceJoin reports whether someone else than PodRedis, such as
// regosched's redis-roles, asked the server of pod incarnation uid for
// CLUSTER NODES (where a server says its role and shard) after it joined
// the shard: PodRedis sends that only while joining.
func (r *PodRedis) AskedSinceJoin(ctx context.Context, uid types.UID) bool {
	r.mu.Lock()
	s, ok := r.servers[uid]
	r.mu.Unlock()
	if !ok {
		return false
	}
	n, err := s.clusterNodesCalls(ctx)
	return err == nil && n > s.nodesAtJoin
}

// clusterNodesCalls is how many CLUSTER NODES the server has served, from
// INFO commandstats (which counts no CLUSTER NODES of its own).
func (s *podServer) clusterNodesCalls(ctx context.Context) (int, error) {
	stats, err := s.client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO commandstats at %s: %w", s.addr, err)
	}
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_cluster|nodes:calls="); ok {
			calls, _, _ := strings.Cut(rest, ",")
			return strconv.Atoi(calls)
		}
	}
	return 0, nil
}

// Stop kills every server.
func (r *PodRedis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, s := range r.servers {
		s.stop()
		delete(r.servers, uid)
	}
	r.master = nil
}

// sync stops the servers of pods gone or going, then starts and joins one
// for each running pod with an IP that has none, in name order (so that the
// first pod of a StatefulSet takes the slots).
func (r *PodRedis) sync(ctx context.Context) error {
	list, err := r.client.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: r.sel})
	if err != nil {
		return nil // the API server may be busy: next round
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	live := map[types.UID]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live[p.UID] = true
		}
	}
	r.mu.Lock()
	var gone []string
	for uid, s := range r.servers {
		if !live[uid] && s == r.master {
			r.mu.Unlock()
			return fmt.Errorf("pod %s, the shard's master, is going: PodRedis keeps one shard under one master", s.pod)
		}
		if !live[uid] {
			r.log.WithFields(logrus.Fields{"pod": s.pod, "addr": s.addr}).Info("pod Redis: the pod is going; its server stops")
			s.stop()
			delete(r.servers, uid)
			gone = append(gone, s.id)
		}
	}
	r.mu.Unlock()
	for _, id := range gone {
		r.forget(ctx, id)
	}
	for i := range pods {
		p := &pods[i]
		r.mu.Lock()
		_, has := r.servers[p.UID]
		r.mu.Unlock()
		if has || !live[p.UID] || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		if err := r.start(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// forget makes every server forget node id (already forgotten is fine).
func (r *PodRedis) forget(ctx context.Context, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.servers {
		if err := s.client.Do(ctx, "CLUSTER", "FORGET", id).Err(); err != nil && !strings.Contains(err.Error(), "Unknown node") {
			r.log.WithError(err).WithField("pod", s.pod).Warn("pod Redis: CLUSTER FORGET")
		}
	}
}

// start runs pod's server and joins it to the shard.
func (r *PodRedis) start(ctx context.Context, pod *corev1.Pod) error {
	port, bus := containerPort(pod, portRedis), containerPort(pod, portBus)
	if port == 0 || bus != port+10000 {
		return fmt.Errorf("pod %s: want container ports %s and %s = %s+10000, have %d and %d", pod.Name, portRedis, portBus, portRedis, port, bus)
	}
	ip := pod.Status.PodIP
	if ip == pod.Status.HostIP {
		return fmt.Errorf("pod %s: its IP %s is its node's", pod.Name, ip)
	}
	dir := filepath.Join(r.dir, pod.Name+"-"+string(pod.UID)[:8])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	log := r.log.WithFields(logrus.Fields{"pod": pod.Name, "addr": addr})
	proc, err := localcluster.StartChild(log, dir, "redis-"+pod.Name, filepath.Join(dir, "redis.log"), r.bin, podRedisArgs(ip, port, dir)...)
	if err != nil {
		return err
	}
	s := &podServer{pod: pod.Name, uid: pod.UID, addr: addr, proc: proc, client: redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})}
	if err := r.join(ctx, s); err != nil {
		s.stop()
		return fmt.Errorf("pod %s: %w\n%s", pod.Name, err, proc.LogTail(10))
	}
	if s.nodesAtJoin, err = s.clusterNodesCalls(ctx); err != nil {
		s.stop()
		return fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	r.mu.Lock()
	r.servers[pod.UID] = s
	role := "replica"
	if r.master == nil {
		r.master, role = s, "master"
	}
	r.mu.Unlock()
	log.WithField("role", role).Info("pod Redis: server up and in the shard")
	return nil
}

// podRedisArgs is the command line of a pod's redis-server: on the pod's
// IP only, for listening and for its own connections too (bind-source-addr,
// without which its peers would see it at 127.0.0.1 and the cluster never
// forms); no protected mode, which refuses connections from any loopback
// address but 127.0.0.1; nothing persisted.
func podRedisArgs(ip string, port int, dir string) []string {
	return []string{
		"--bind", ip, "--bind-source-addr", ip, "--port", strconv.Itoa(port), "--protected-mode", "no",
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000",
		"--dir", dir, "--daemonize", "no", "--logfile", "", "--save", "", "--appendonly", "no",
		"--repl-diskless-sync-delay", "0",
	}
}

// join waits until s answers, then makes it the master of every slot (the
// first server) or a replica of the master.
func (r *PodRedis) join(ctx context.Context, s *podServer) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, podRedisTimeout, true, func(ctx context.Context) (bool, error) {
		if s.proc.Exited() {
			return false, s.proc.ExitError()
		}
		id, err := s.client.Do(ctx, "CLUSTER", "MYID").Text()
		s.id = id
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for its redis-server at %s: %w", s.addr, err)
	}
	r.mu.Lock()
	m := r.master
	r.mu.Unlock()
	if m == nil {
		if err := s.client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE: %w", err)
		}
		return nil
	}
	host, port, _ := net.SplitHostPort(m.addr)
	if err := s.client.Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
		return fmt.Errorf("CLUSTER MEET %s: %w", m.addr, err)
	}
	// Replicated only once it knows the master's slots, so that its shard
	// reads slot-0 from its first answer on.
	var last string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, podRedisTimeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := s.client.ClusterNodes(ctx).Result()
		last = nodes
		if err != nil || !knowsMaster(nodes, m.id) {
			return false, nil
		}
		return s.client.Do(ctx, "CLUSTER", "REPLICATE", m.id).Err() == nil, nil
	})
	if err != nil {
		return fmt.Errorf("joining master %s (%s): %w; CLUSTER NODES:\n%s", m.id, m.addr, err, last)
	}
	return nil
}

// knowsMaster reports whether a CLUSTER NODES reply lists id as a
// connected master of every slot.
func knowsMaster(nodes, id string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) >= 9 && f[0] == id && strings.Contains(f[2], "master") && f[7] == "connected" && f[8] == "0-16383" {
			return true
		}
	}
	return false
}

func (s *podServer) stop() {
	s.proc.Kill()
	_ = s.client.Close()
}

// containerPort is the number of pod's container port name, 0 if none.
func containerPort(pod *corev1.Pod, name string) int {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return int(p.ContainerPort)
			}
		}
	}
	return 0
}
