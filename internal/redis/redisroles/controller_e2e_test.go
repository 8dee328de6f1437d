//go:build e2e

package redisroles

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localredis"
)

const testInterval = 300 * time.Millisecond

// redisPod is a pod of the default policy's generic Redis workload whose
// Redis listens on 127.0.0.1:port, as a chart would name its port.
func redisPod(name string, port int, env ...corev1.EnvVar) *corev1.Pod {
	return fixture.MakePod().Namespace("shop").Name(name).UID(name+"-uid").Labels(genericRedis).StatefulSet("cache", "sts").
		Container(corev1.Container{Name: "redis", Env: env, Ports: []corev1.ContainerPort{{Name: "tcp-redis", ContainerPort: int32(port)}}}).
		Phase(corev1.PodRunning).PodIP("127.0.0.1").Obj()
}

// startController runs a controller at testInterval (see runController).
func startController(t *testing.T, client kubernetes.Interface, cfg Config) (*Controller, *prometheus.Registry) {
	t.Helper()
	cfg.Interval = testInterval
	return runController(t, client, cfg)
}

// roleLabels reads the live role labels of every pod of shop.
func roleLabels(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	pods, err := client.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Labels["regosched.io/role"] + "/" + p.Labels["regosched.io/shard"]
	}
	return out, nil
}

// waitLabels waits until the pods' labels are want, and returns how long it took.
func waitLabels(t *testing.T, ctx context.Context, client kubernetes.Interface, want map[string]string) time.Duration {
	t.Helper()
	start := time.Now()
	var got map[string]string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = roleLabels(ctx, client)
		return err == nil && cmp.Equal(want, got), err
	})
	if err != nil {
		t.Fatalf("role labels never became what Redis says (-want +got):\n%s", cmp.Diff(want, got))
	}
	return time.Since(start)
}

// wantFromCluster is what the labels must say: each node's ROLE, and its
// shard named after the lowest slot of its master.
func wantFromCluster(t *testing.T, ctx context.Context, c *localredis.Cluster, slots map[int]string) map[string]string {
	t.Helper()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, n := range nodes {
		name := "cache-" + strconv.Itoa(n.Port)
		if n.Role == localredis.RoleMaster {
			want[name] = Master + "/" + slots[n.Port]
		} else {
			want[name] = Replica + "/" + slots[n.MasterPort]
		}
	}
	return want
}

func TestControllerFollowsRedisCluster(t *testing.T) {
	ctx := t.Context()
	cluster, err := localredis.StartCluster(ctx, localredis.Options{Dir: t.TempDir()}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	client := fake.NewClientset()
	for _, port := range cluster.Ports() {
		if _, err := client.CoreV1().Pods("shop").Create(ctx, redisPod("cache-"+strconv.Itoa(port), port), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := startController(t, client, Config{})

	// The shard of each master is named after the lowest slot it serves,
	// read here with CLUSTER SLOTS (not the CLUSTER NODES the controller
	// parses).
	slots := lowestSlots(t, ctx, cluster.Ports()[0])
	nodes, err := cluster.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	took := waitLabels(t, ctx, client, wantFromCluster(t, ctx, cluster, slots))
	t.Logf("labels matched ROLE %v after the controller started", took.Round(time.Millisecond))

	// A real failover: the replica takes its master's slots, and with them
	// its shard's name.
	var replica, master int
	for _, n := range nodes {
		if n.Role == localredis.RoleReplica {
			replica, master = n.Port, n.MasterPort
			break
		}
	}
	slots[replica] = slots[master]
	failoverAt := time.Now()
	if err := cluster.Failover(ctx, replica); err != nil {
		t.Fatal(err)
	}
	waitLabels(t, ctx, client, wantFromCluster(t, ctx, cluster, slots))
	t.Logf("labels flipped %v after CLUSTER FAILOVER was sent (interval %v)", time.Since(failoverAt).Round(time.Millisecond), testInterval)
	// Six labelled at first, then the two of the failover.
	if got := testutil.ToFloat64(c.changesTotal); got != 8 {
		t.Errorf("regosched_redis_role_changes_total = %v, want 8", got)
	}
}

func TestControllerFailures(t *testing.T) {
	ctx := t.Context()
	repl, err := localredis.StartReplication(ctx, localredis.Options{Dir: t.TempDir(), Password: "s3cret"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Stop()
	ports := repl.Ports()
	client := fake.NewClientset()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache-redis"}, Data: map[string][]byte{"redis-password": []byte("s3cret")}}
	if _, err := client.CoreV1().Secrets("shop").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// valkey-io's operator probes as an ACL user of its own, whose password
	// is not the default user's.
	acl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(ports[1]), Password: "s3cret", Protocol: 2})
	err = acl.Do(ctx, "ACL", "SETUSER", "_operator", "on", ">op-pass", "~*", "+@all").Err()
	_ = acl.Close()
	if err != nil {
		t.Fatal(err)
	}
	fromSecret := corev1.EnvVar{Name: "REDIS_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cache-redis"}, Key: "redis-password"}}}
	pods := []*corev1.Pod{
		redisPod("master", ports[0], fromSecret),
		redisPod("replica", ports[1], corev1.EnvVar{Name: "REDIS_PASSWORD", Value: "s3cret"}),
		// Bitnami's valkey charts name it VALKEY_PASSWORD (redis-server
		// stands in for valkey-server, which Debian 12 does not ship).
		redisPod("valkey-replica", ports[1], corev1.EnvVar{Name: "VALKEY_PASSWORD", Value: "s3cret"}),
		redisPod("valkey-io-replica", ports[1], corev1.EnvVar{Name: "VALKEY_USER", Value: "_operator"}, corev1.EnvVar{Name: "VALKEYCLI_AUTH", Value: "op-pass"}),
		redisPod("no-password", ports[1]),
		redisPod("wrong-password", ports[1], corev1.EnvVar{Name: "REDIS_PASSWORD", Value: "nope"}),
		redisPod("closed-port", freePort(t)),
	}
	pods[4].Labels["regosched.io/role"] = "master" // a stale label stays: no guess replaces it
	for _, p := range pods {
		if _, err := client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, reg := startController(t, client, Config{PodSecrets: true})
	waitLabels(t, ctx, client, map[string]string{
		"master": "master/", "replica": "replica/", "valkey-replica": "replica/", "valkey-io-replica": "replica/", "no-password": "master/", "wrong-password": "/", "closed-port": "/",
	})
	errs := func(reason string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "regosched_redis_role_errors_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return errs(ReasonAuth) >= 2 && errs(ReasonUnreachable) >= 1, nil
	})
	if err != nil {
		t.Errorf("errors counted: auth %v (want >= 2), unreachable %v (want >= 1)", errs(ReasonAuth), errs(ReasonUnreachable))
	}

	// Promotion in replication mode flips both.
	if err := repl.Promote(ctx, ports[1]); err != nil {
		t.Fatal(err)
	}
	waitLabels(t, ctx, client, map[string]string{
		"master": "replica/", "replica": "master/", "valkey-replica": "master/", "valkey-io-replica": "master/", "no-password": "master/", "wrong-password": "/", "closed-port": "/",
	})
}

// lowestSlots maps each master's port to "slot-<the lowest slot it serves>",
// read with CLUSTER SHARDS (not the CLUSTER NODES the controller parses).
func lowestSlots(t *testing.T, ctx context.Context, port int) map[int]string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), Protocol: 2})
	defer func() { _ = c.Close() }()
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, s := range shards {
		if len(s.Slots) == 0 {
			continue
		}
		lowest := s.Slots[0].Start
		for _, r := range s.Slots {
			lowest = min(lowest, r.Start)
		}
		for _, n := range s.Nodes {
			if n.Role == "master" {
				out[int(n.Port)] = "slot-" + strconv.FormatInt(lowest, 10)
			}
		}
	}
	return out
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// writeCerts writes a CA and a certificate it signs for 127.0.0.1, good for
// both ends of TLS (Redis asks its clients for a certificate by default).
func writeCerts(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// TLS to Redis: verified against the CA, with a client certificate; the
// same servers refuse a client without one, and the labels stay.
func TestControllerOverTLS(t *testing.T) {
	ctx := t.Context()
	caFile, certFile, keyFile := writeCerts(t, t.TempDir())
	clientTLS, err := TLSConfig(caFile, certFile, keyFile, "", false)
	if err != nil {
		t.Fatal(err)
	}
	repl, err := localredis.StartReplication(ctx, localredis.Options{Dir: t.TempDir(),
		TLS: &localredis.TLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile, Client: clientTLS}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Stop()
	ports := repl.Ports()
	client := fake.NewClientset()
	for name, port := range map[string]int{"master": ports[0], "replica": ports[1]} {
		if _, err := client.CoreV1().Pods("shop").Create(ctx, redisPod(name, port), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, client, Config{TLS: clientTLS})
	waitLabels(t, ctx, client, map[string]string{"master": "master/", "replica": "replica/"})

	// Without a client certificate the handshake fails: counted, no guess.
	other := fake.NewClientset()
	if _, err := other.CoreV1().Pods("shop").Create(ctx, redisPod("master", ports[0]), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	noCert, err := TLSConfig(caFile, "", "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	_, reg := startController(t, other, Config{TLS: noCert})
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mfs, err := reg.Gather()
		if err != nil {
			return false, err
		}
		for _, mf := range mfs {
			if mf.GetName() == "regosched_redis_role_errors_total" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal("a refused TLS handshake was never counted")
	}
	waitLabels(t, ctx, other, map[string]string{"master": "/"})
}
