// Package localcluster runs a throwaway Kubernetes control plane (etcd and
// kube-apiserver, optionally kube-scheduler and kube-controller-manager) on
// loopback, for end-to-end tests and demos of regosched.
//
// There is no container runtime and no kubelet: nodes are plain Node objects
// whose status claims capacity and readiness, which is all a scheduler looks
// at; pods bound to them stay Pending. Kwok gives a test nodes that run pods.
//
// Binaries come from Build, which compiles them from the tool modules under
// deploy/local/tools into a cache folder. Every child runs in its own
// process group and dies with the test process, so a failing or killed test
// leaves nothing running:
//
//	bins, err := localcluster.Build(ctx, localcluster.BuildOptions{Log: log})
//	...
//	c, err := localcluster.Start(ctx, localcluster.Config{Binaries: bins, Nodes: 3, Log: log})
//	...
//	t.Cleanup(c.Stop)
package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// startTimeout bounds each wait during Start (etcd health, apiserver
// readiness, default namespace). Generous, because the machines running
// these tests are often busy compiling.
const startTimeout = 2 * time.Minute

// Config configures Start.
type Config struct {
	// Binaries are the executables to run, usually from Build.
	Binaries Binaries
	// Dir holds data, credentials and logs. A temporary folder is created
	// (and removed by Stop) when empty; a given Dir is kept.
	Dir string
	// Nodes is the number of fake nodes to create.
	Nodes int
	// Zones are assigned to nodes round robin as topology.kubernetes.io/zone;
	// zone-a, zone-b and zone-c when empty.
	Zones []string
	// NodeWorkers bounds concurrent requests while creating the nodes;
	// a small default (8) when zero. Raise it to create many nodes fast.
	NodeWorkers int
	// Log receives progress messages; nil discards them.
	Log logrus.FieldLogger
}

// Cluster is a running control plane. Stop it when done.
type Cluster struct {
	log            logrus.FieldLogger
	bins           Binaries
	dir            string
	ownsDir        bool
	zones          []string
	kubeconfigPath string
	restConfig     *rest.Config
	client         kubernetes.Interface
	nodeWorkers    int // concurrent node creations; the nodeWorkers const when 0

	mu        sync.Mutex
	procs     []*Process // in start order
	nodeCount int        // nodes created so far, for AddNodes numbering
	stopped   bool

	stopOnce sync.Once
	kwok     kwokState // the cluster's kwok, with a lock of its own (kwok.go)
}

// Start runs etcd and kube-apiserver, writes an admin kubeconfig and creates
// cfg.Nodes ready nodes. ctx bounds the start-up only; the processes run
// until Stop. On error, everything started so far is stopped. Outside Linux
// it returns CheckOS's error.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if err := CheckOS(); err != nil {
		return nil, err
	}
	c := &Cluster{
		log:   orDiscard(cfg.Log),
		bins:  cfg.Binaries,
		dir:   cfg.Dir,
		zones: cfg.Zones,

		nodeWorkers: cfg.NodeWorkers,
	}
	if len(c.zones) == 0 {
		c.zones = []string{"zone-a", "zone-b", "zone-c"}
	}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "regosched-cluster-"); err != nil {
			return nil, fmt.Errorf("creating cluster folder: %w", err)
		}
		c.ownsDir = true
	} else if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cluster folder: %w", err)
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL, err := c.startEtcd(ctx, ports[0], ports[1])
	if err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, etcdURL, ports[2]); err != nil {
		return nil, err
	}
	if err := c.waitForDefaultNamespace(ctx); err != nil {
		return nil, err
	}
	if _, err := c.AddNodes(ctx, cfg.Nodes); err != nil {
		return nil, err
	}
	c.log.WithField("kubeconfig", c.kubeconfigPath).Info("cluster ready")
	return c, nil
}

// Dir returns the folder holding the cluster's data and logs.
func (c *Cluster) Dir() string { return c.dir }

// KubeconfigPath returns the admin kubeconfig file.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfigPath }

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Binaries returns the executables the cluster runs.
func (c *Cluster) Binaries() Binaries { return c.bins }

// StartProcess starts path with args the way the control plane's own
// components are started: in its own process group, with output appended to
// Dir()/<name>.log, and stopped by Stop (or Process.Stop). ctx only guards
// the start; it does not bound the process's life.
func (c *Cluster) StartProcess(ctx context.Context, name, path string, args ...string) (*Process, error) {
	return c.StartProcessEnv(ctx, name, path, nil, args...)
}

// StartProcessEnv is StartProcess with env (KEY=value) added to this
// process's environment for the child.
func (c *Cluster) StartProcessEnv(ctx context.Context, name, path string, env []string, args ...string) (*Process, error) {
	return c.startProcessAs(ctx, name, path, "", env, args...)
}

// startProcessAs is StartProcessEnv with argv0, unless empty, as the child's
// argv[0].
func (c *Cluster) startProcessAs(ctx context.Context, name, path, argv0 string, env []string, args ...string) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	// Hold the lock across the start, so that a concurrent Stop either sees
	// the new process or refuses to start it: nothing escapes Stop.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, fmt.Errorf("starting %s: cluster is stopped", name)
	}
	p, err := startChild(c.log, c.dir, name, filepath.Join(c.dir, name+".log"), path, argv0, env, args...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// Processes returns the processes the cluster has started so far (etcd,
// kube-apiserver, then whatever StartProcess started, stopped ones
// included), in start order. The slice is a copy.
func (c *Cluster) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Process(nil), c.procs...)
}

// Kubectl runs kubectl with the admin kubeconfig and returns its standard
// output. The error includes standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.bins.Kubectl, append([]string{"--kubeconfig", c.kubeconfigPath}, args...)...)
	cmd.SysProcAttr = ChildSysProcAttr()
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return out, fmt.Errorf("kubectl %v: %w: %s", args, err, exitErr.Stderr)
		}
		return out, fmt.Errorf("kubectl %v: %w", args, err)
	}
	return out, nil
}

// Stop stops every process the cluster started, newest first (so that
// clients go before the apiserver and the apiserver before etcd), and
// removes Dir if Start created it. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopped = true
		procs := c.procs
		c.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop()
		}
		if c.ownsDir {
			if err := os.RemoveAll(c.dir); err != nil {
				c.log.WithError(err).Warn("removing cluster folder")
			}
		}
		c.log.Info("cluster stopped")
	})
}

func (c *Cluster) startEtcd(ctx context.Context, clientPort, peerPort int) (string, error) {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := c.StartProcess(ctx, "etcd", c.bins.Etcd,
		"--name=default",
		"--data-dir="+filepath.Join(c.dir, "etcd-data"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// The data is thrown away after the test: durability buys nothing,
		// and fsync on every write slows the apiserver down a lot.
		"--unsafe-no-fsync",
		// Fewer, smaller snapshots and a bounded database for short runs.
		"--snapshot-count=10000",
		"--quota-backend-bytes="+strconv.Itoa(2<<30),
		"--log-level=warn",
	)
	if err != nil {
		return "", err
	}

	hc := &http.Client{Timeout: 2 * time.Second}
	err = c.poll(ctx, p, "etcd health", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		defer resp.Body.Close()
		var h struct {
			Health string `json:"health"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&h) != nil {
			return false, nil
		}
		return h.Health == "true", nil
	})
	if err != nil {
		return "", err
	}
	c.log.WithField("url", clientURL).Info("etcd ready")
	return clientURL, nil
}

func (c *Cluster) startAPIServer(ctx context.Context, etcdURL string, port int) error {
	pki := filepath.Join(c.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("creating pki folder: %w", err)
	}
	saKey, saPub, err := writeServiceAccountKey(pki)
	if err != nil {
		return err
	}
	token, tokenFile, err := writeTokenFile(pki)
	if err != nil {
		return err
	}
	certDir := filepath.Join(pki, "serving")

	p, err := c.StartProcess(ctx, "kube-apiserver", c.bins.KubeAPIServer,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		// The apiserver self-signs a serving certificate (valid for the
		// bind address) into this folder; clients trust it as their CA.
		"--cert-dir="+certDir,
		"--token-auth-file="+tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// ServiceAccount would make every pod wait for a token controller
		// that does not run here; TaintNodesByCondition would taint every
		// new node not-ready, and no kubelet ever clears that.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		// The "kubernetes" service cannot point at a loopback address, and
		// the reconciler would complain about it forever.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	)
	if err != nil {
		return err
	}

	host := "https://127.0.0.1:" + strconv.Itoa(port)
	caFile := filepath.Join(certDir, "apiserver.crt")
	var caData []byte
	insecure := false
	err = c.poll(ctx, p, "apiserver readiness", func(ctx context.Context) (bool, error) {
		if caData == nil && !insecure {
			data, err := os.ReadFile(caFile)
			if err != nil {
				return false, nil // not written yet
			}
			caData = data
		}
		err := checkReadyz(ctx, adminConfig(host, token, caData, insecure))
		var verifyErr *tls.CertificateVerificationError
		if errors.As(err, &verifyErr) {
			// Should not happen (the certificate covers 127.0.0.1), but an
			// unverified local cluster beats no cluster.
			c.log.WithError(err).Warn("apiserver certificate does not verify; skipping TLS verification")
			caData, insecure = nil, true
			return false, nil
		}
		return err == nil, nil
	})
	if err != nil {
		return err
	}

	c.restConfig = adminConfig(host, token, caData, insecure)
	if c.client, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	c.kubeconfigPath = filepath.Join(c.dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.kubeconfigPath, host, token, caData, insecure); err != nil {
		return err
	}
	c.log.WithField("url", host).Info("kube-apiserver ready")
	return nil
}

func (c *Cluster) waitForDefaultNamespace(ctx context.Context) error {
	return c.poll(ctx, nil, "default namespace", func(ctx context.Context) (bool, error) {
		// The apiserver creates it shortly after turning ready; until then
		// (and on any transient error) keep asking.
		_, err := c.client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err == nil, nil
	})
}

// poll calls check every 100ms until it reports done, fails, startTimeout
// passes, or p (if not nil) exits, which is reported with its log's tail.
func (c *Cluster) poll(ctx context.Context, p *Process, what string, check wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		if p != nil {
			select {
			case <-p.Done():
				return false, p.exitError()
			default:
			}
		}
		return check(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func adminConfig(host, token string, caData []byte, insecure bool) *rest.Config {
	return &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData, Insecure: insecure},
		// client-go's default of 5 QPS makes creating a thousand nodes take
		// minutes; nothing else shares this apiserver.
		QPS:   1000,
		Burst: 2000,
	}
}

func checkReadyz(ctx context.Context, cfg *rest.Config) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	hc.Timeout = 5 * time.Second
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

func writeKubeconfig(path, host, token string, caData []byte, insecure bool) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{
		Server:                   host,
		CertificateAuthorityData: caData,
		InsecureSkipTLSVerify:    insecure,
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin", Namespace: metav1.NamespaceDefault}
	kc.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// writeServiceAccountKey writes an RSA key pair for signing and verifying
// service account tokens, returning the private and public key files.
func writeServiceAccountKey(dir string) (keyFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generating service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("encoding service account public key: %w", err)
	}
	keyFile = filepath.Join(dir, "sa.key")
	pubFile = filepath.Join(dir, "sa.pub")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("writing service account key: %w", err)
	}
	if err := os.WriteFile(pubFile, pubPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("writing service account public key: %w", err)
	}
	return keyFile, pubFile, nil
}

// writeTokenFile writes a static token file with one random admin token in
// group system:masters, which RBAC lets do anything.
func writeTokenFile(dir string) (token, file string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("generating admin token: %w", err)
	}
	token = hex.EncodeToString(b)
	file = filepath.Join(dir, "tokens.csv")
	// Format: token,user,uid,"group1,group2".
	line := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", token)
	if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
		return "", "", fmt.Errorf("writing token file: %w", err)
	}
	return token, file, nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. All listeners
// stay open until every port is chosen, so the kernel cannot hand out the
// same port twice; another process may still grab one before the child
// binds it, which is rare enough on a test machine.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
