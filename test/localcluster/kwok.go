package localcluster

import (
	"context"
	"crypto/sha256"
	_ "embed" // kwok-stages.yaml
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// kwokPackage is kwok's main package, installed at KwokVersion.
const kwokPackage = "sigs.k8s.io/kwok/cmd/kwok"

// Kwok marks: a node annotated KwokNodeAnnotation=KwokNodeValue is
// kwok's (and only such nodes and their pods are), labelled KwokNodeLabel=
// KwokNodeValue for node selectors, and tainted KwokNodeAnnotation=
// KwokNodeValue:NoSchedule so that only pods that tolerate it go there.
const (
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	KwokNodeLabel      = "kwok.x-k8s.io/node"
	KwokNodeValue      = "fake"
)

// kwokStages are the node and pod stages kwok plays (see the file).
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// kwokKey names kwok's cache folder: the package, its version and the
// target platform, so that a bump of KwokVersion builds anew.
func kwokKey(version string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s@%s %s/%s\n", kwokPackage, version, runtime.GOOS, runtime.GOARCH))
	return hex.EncodeToString(sum[:])
}

// BuildKwok installs kwok at KwokVersion with "go install" into a cache
// folder of its own (bin-<key> beside the control plane's, under
// opts.CacheDir or DefaultCacheDir), unless an earlier run left it there,
// and returns the binary's path. kwok is a module of its own: the build
// leaves the project's go.mod alone. A cold build takes minutes, with
// progress lines as Build's.
func BuildKwok(ctx context.Context, opts BuildOptions) (string, error) {
	if err := CheckOS(); err != nil {
		return "", err
	}
	log := orDiscard(opts.Log)
	cacheDir := opts.CacheDir
	if cacheDir == "" {
		var err error
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(cacheDir, "bin-"+kwokKey(KwokVersion)[:16])
	bin := filepath.Join(dir, "kwok")
	if fileExists(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating kwok's cache folder: %w", err)
	}
	unlock, err := lockBuilds(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(bin) {
		return bin, nil // another process built it meanwhile
	}
	// Installed beside the final path and renamed into place, as Build
	// does: an interrupted build never leaves a truncated binary.
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Errorf("creating kwok's build folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	what := "kwok " + KwokVersion
	log = log.WithField("dir", dir)
	log.Infof("building %s (a cold build takes minutes)", what)
	cmd := exec.CommandContext(ctx, "go", "install", "-v", kwokPackage+"@"+KwokVersion)
	cmd.Dir = tmp
	// GOWORK=off: a go.work above the checkout has no say in a pkg@version
	// install, and GOBIN puts the binary where it is renamed from.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOBIN="+tmp)
	cmd.SysProcAttr = ChildSysProcAttr()
	progress := newBuildProgress(log, what, nil, 0, start)
	if err := progress.run(cmd); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", kwokPackage, KwokVersion, err, progress.output())
	}
	if err := os.Rename(filepath.Join(tmp, "kwok"), bin); err != nil {
		return "", fmt.Errorf("moving kwok into the cache: %w", err)
	}
	log.WithField("took", time.Since(start).Round(time.Second)).Infof("built %s", what)
	return bin, nil
}

// Kwok is a running kwok, the cluster's stand-in for kubelets on the nodes
// it manages: it reports them Ready, runs their pods (Running and Ready,
// each with an IP of its node's spec.podCIDR), and completes their
// deletions and evictions at once, so that controllers recreate pods.
//
// Every address it hands out is on loopback: the tests dial pods' IPs, and
// kwok's default pod range (10.0.0.0/24) is not to be dialled here. Nodes
// get podCIDR 127.X.N.0/24 (AddNodes) and InternalIP NodeIP (127.X.0.1), so
// that no pod's IP is its node's; X is drawn per cluster, so that two
// clusters on one machine rarely share addresses.
type Kwok struct {
	*Process
	// NodeIP is the InternalIP of every node kwok manages.
	NodeIP string

	c     *Cluster
	octet int // X of 127.X.0.0/16
}

// kwokPrefix is the 127.X.0.0/16 of octet X.
func kwokPrefix(octet int) string { return "127." + strconv.Itoa(octet) + "." }

// kwokArgs is kwok's command line: only nodes annotated
// KwokNodeAnnotation=KwokNodeValue (never the cluster's other nodes, nor
// the pods bound to them), pods of a node without podCIDR in 127.X.255.0/24,
// no node Leases (nothing reads them), and /healthz on health.
func kwokArgs(kubeconfig, config, health string, octet int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeValue,
		"--cidr=" + kwokPrefix(octet) + "255.0/24",
		"--node-ip=" + kwokPrefix(octet) + "0.1",
		"--node-lease-duration-seconds=0",
		"--server-address=" + health,
	}
}

// Kwok returns the cluster's kwok, building it (BuildKwok, cached) and
// starting it on first use, and again if it exited. Like the other
// components its output goes to Dir()/kwok.log and it stops with the
// cluster; tests share it, since two would fight over the same nodes.
func (c *Cluster) Kwok(ctx context.Context) (*Kwok, error) {
	c.kwok.mu.Lock()
	defer c.kwok.mu.Unlock()
	old := c.kwok.running
	if old != nil && !old.Exited() {
		return old, nil
	}
	// X is kept across a restart, so that nodes keep their addresses.
	octet := 64 + rand.IntN(64)
	if old != nil {
		c.log.WithError(old.ExitError()).Warn("kwok had exited; starting it again")
		octet = old.octet
	}
	k, err := c.startKwok(ctx, octet)
	if err != nil {
		return nil, err
	}
	c.kwok.running = k
	return k, nil
}

// kwokState is the cluster's kwok, and the node podCIDRs handed out.
type kwokState struct {
	mu      sync.Mutex // held while Kwok starts one
	running *Kwok      // nil until Kwok
	cidrs   int        // node podCIDRs AddNodes handed out
}

func (c *Cluster) startKwok(ctx context.Context, octet int) (*Kwok, error) {
	bin, err := BuildKwok(ctx, BuildOptions{Log: c.log})
	if err != nil {
		return nil, err
	}
	// kwok reads KWOK_WORKDIR/kwok.yaml besides --config: a folder of the
	// cluster's keeps a developer's ~/.kwok out of the tests.
	work := filepath.Join(c.dir, "kwok")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("creating kwok's folder: %w", err)
	}
	config := filepath.Join(work, "kwok.yaml")
	if err := os.WriteFile(config, kwokStages, 0o644); err != nil {
		return nil, fmt.Errorf("writing kwok's stages: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	health := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := c.StartProcessEnv(ctx, "kwok", bin, []string{"KWOK_WORKDIR=" + work},
		kwokArgs(c.kubeconfigPath, config, health, octet)...)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	err = c.poll(ctx, p, "kwok health", func(ctx context.Context) (bool, error) {
		return answersOK(ctx, hc, "http://"+health+"/healthz")
	})
	if err != nil {
		p.Stop()
		return nil, err
	}
	k := &Kwok{Process: p, NodeIP: kwokPrefix(octet) + "0.1", c: c, octet: octet}
	c.log.WithFields(logrus.Fields{"nodeIP": k.NodeIP, "pods": kwokPrefix(octet) + "N.0/24"}).Info("kwok ready")
	return k, nil
}

// errNoCIDR is AddNodes' answer once 127.X.1.0/24 to 127.X.254.0/24 are
// all handed out.
var errNoCIDR = errors.New("kwok: every node podCIDR of 127.X.1-254.0/24 is taken")

// nextCIDR hands out the next node podCIDR.
func (k *Kwok) nextCIDR() (string, error) {
	st := &k.c.kwok
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cidrs >= 254 {
		return "", errNoCIDR
	}
	st.cidrs++
	return kwokPrefix(k.octet) + strconv.Itoa(st.cidrs) + ".0/24", nil
}
