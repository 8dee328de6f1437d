// Package localstack runs the whole regosched stack on loopback: a local
// control plane (test/localcluster), the regosched extender built from
// the working tree, and a kube-scheduler configured from
// deploy/scheduler/kube-scheduler-config.yaml to call it. The end-to-end
// tests and the demo share it, together with its workload helpers and an
// independent checker of the placement rules; their pods are built by
// test/fixture.
//
//	s, err := localstack.Start(ctx, localstack.Options{Nodes: 6, Log: log})
//	...
//	defer s.Stop()
//	master := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Schedulable()
//	node, pending, reason, err := s.CreateAndWait(ctx, master.Obj())
package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/test/localcluster"
)

// schedulerConfigPath is the deployed scheduler configuration, relative to
// the repository root; the stack runs exactly that, adapted to loopback.
const schedulerConfigPath = "deploy/scheduler/kube-scheduler-config.yaml"

// readyTimeout bounds the wait for regosched's /readyz. Generous: the
// machines running this are often busy compiling.
const readyTimeout = 2 * time.Minute

// Process names, which are also the log file names in the cluster folder.
const (
	extenderName  = "regosched"
	schedulerName = "kube-scheduler"
)

// Options configures Start.
type Options struct {
	// Nodes is the number of fake nodes, spread round robin over Zones.
	Nodes int
	// Zones are the node zones; localcluster's zone-a, zone-b, zone-c when
	// empty.
	Zones []string
	// PolicyPath is passed to regosched serve --policy; empty runs the
	// embedded default policy.
	PolicyPath string
	// Grouped tells which bound pods regosched's cache indexes (its
	// regosched_cached_pods metric), so that helpers can wait for the cache
	// to catch up with the API. DefaultGrouped, matching the default
	// policy, is used when nil; set it when PolicyPath groups other pods.
	Grouped func(labels map[string]string) bool
	// NoBindVerb removes bindVerb from the extender entry of the deployed
	// scheduler configuration, so that kube-scheduler binds by itself and
	// regosched's commit-time check never runs. The zero value runs the
	// deployed file as it is (which configures bindVerb).
	NoBindVerb bool
	// ExtenderArgs are extra arguments of regosched serve, e.g.
	// "--inflight-wait=0"; later flags win over the stack's own.
	ExtenderArgs []string
	// TLS runs regosched over mutual TLS (see Variant.TLS). The zero value
	// serves plain HTTP, as before.
	TLS bool
	// NoScheduler leaves kube-scheduler out of Start: the control plane
	// and regosched run, and the caller starts a scheduler of its own
	// (e.g. with SchedulerConfig and Cluster().StartScheduler) when it
	// likes. Helpers that check the scheduler is alive then skip that
	// check. The zero value starts the deployed scheduler as before.
	NoScheduler bool
	// NodeWorkers bounds concurrent requests while creating the nodes
	// (localcluster.Config.NodeWorkers); localcluster's default when 0.
	NodeWorkers int
	// SchedulerConfig, when set, is the KubeSchedulerConfiguration the
	// scheduler runs (adapted to the stack like deploy/'s), e.g. the Helm
	// chart's rendering; deploy/scheduler/kube-scheduler-config.yaml when
	// empty.
	SchedulerConfig []byte
	// RepoRoot is the checkout to build and read deploy/ from;
	// localcluster.FindRepoRoot is used when empty.
	RepoRoot string
	// Log receives progress messages; nil discards them.
	Log logrus.FieldLogger
}

// Stack is a running control plane, regosched and kube-scheduler. Stop it
// when done.
type Stack struct {
	log        logrus.FieldLogger
	root       string
	binDir     string // holds the freshly built regosched binary
	extBin     string
	policyPath string
	// schedulerConfig is Options.SchedulerConfig.
	schedulerConfig []byte
	grouped         func(map[string]string) bool
	cluster         *localcluster.Cluster
	listen          string // host:port regosched serves on, kept across restarts
	http            *http.Client

	tlsFiles *TLSFiles    // generated on first use of the TLS variant; guarded by mu
	tlsHTTP  *http.Client // presents the scheduler's client certificate; guarded by mu

	mu        sync.Mutex
	variant   Variant               // guarded by mu
	extender  *localcluster.Process // nil while stopped
	scheduler *localcluster.Process

	kcmMu sync.Mutex            // held while ControllerManager starts one
	kcm   *localcluster.Process // guarded by kcmMu; nil until ControllerManager

	stopOnce sync.Once
}

// Start builds what is needed (control plane binaries only when not
// cached; regosched always, so that tests test the working tree), starts
// the control plane with opts.Nodes nodes, regosched, and kube-scheduler,
// and returns once regosched reports ready. On error everything started is
// stopped. ctx bounds the start-up only.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	log := opts.Log
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	root := opts.RepoRoot
	if root == "" {
		if root, err = localcluster.FindRepoRoot(); err != nil {
			return nil, err
		}
	}
	s := &Stack{
		log:             log,
		root:            root,
		policyPath:      opts.PolicyPath,
		schedulerConfig: opts.SchedulerConfig,
		grouped:         opts.Grouped,
		http:            &http.Client{Timeout: 5 * time.Second},
		variant:         Variant{NoBindVerb: opts.NoBindVerb, ExtenderArgs: slices.Clone(opts.ExtenderArgs), TLS: opts.TLS},
	}
	if s.grouped == nil {
		s.grouped = DefaultGrouped
	}
	if s.binDir, err = os.MkdirTemp("", "regosched-bin-"); err != nil {
		return nil, fmt.Errorf("creating binary folder: %w", err)
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	s.extBin = filepath.Join(s.binDir, "regosched")

	// Both builds are mostly waiting on the Go build cache; overlapping
	// them saves the shorter one.
	var bins localcluster.Binaries
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		bins, err = localcluster.Build(gctx, localcluster.BuildOptions{RepoRoot: root, Log: log})
		return err
	})
	g.Go(func() error { return s.buildExtender(gctx) })
	if err := g.Wait(); err != nil {
		return nil, err
	}

	s.cluster, err = localcluster.Start(ctx, localcluster.Config{
		Binaries: bins, Nodes: opts.Nodes, Zones: opts.Zones, NodeWorkers: opts.NodeWorkers, Log: log,
	})
	if err != nil {
		return nil, err
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := s.StartExtender(ctx); err != nil {
		return nil, err
	}
	if !opts.NoScheduler {
		if err := s.startScheduler(ctx); err != nil {
			return nil, err
		}
	}
	log.WithField("extender", s.ExtenderURL()).Info("stack ready")
	return s, nil
}

// buildExtender compiles ./cmd/regosched from the working tree.
func (s *Stack) buildExtender(ctx context.Context) error {
	start := time.Now()
	if err := goBuild(ctx, s.root, s.extBin, "./cmd/regosched"); err != nil {
		return err
	}
	s.log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("regosched built")
	return nil
}

// goBuild builds the main package pkg of the module in dir into out, with
// the compiler's output in the error when it fails.
func goBuild(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", filepath.Base(out), err, buf.String())
	}
	return nil
}

// baseSchedulerConfig is the configuration the stack's scheduler starts
// from: Options.SchedulerConfig, else deploy/'s file.
func (s *Stack) baseSchedulerConfig() ([]byte, error) {
	if s.schedulerConfig != nil {
		return s.schedulerConfig, nil
	}
	base, err := os.ReadFile(filepath.Join(s.root, schedulerConfigPath))
	if err != nil {
		return nil, fmt.Errorf("reading scheduler config: %w", err)
	}
	return base, nil
}

func (s *Stack) startScheduler(ctx context.Context) error {
	cfg, err := s.SchedulerConfig()
	if err != nil {
		return err
	}
	s.mu.Lock()
	noBind := s.variant.NoBindVerb
	s.mu.Unlock()
	if noBind {
		if cfg, err = withoutBindVerb(cfg); err != nil {
			return err
		}
	}
	p, err := s.cluster.StartScheduler(ctx, cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.scheduler = p
	s.mu.Unlock()
	return nil
}

// StopScheduler stops the stack's kube-scheduler, for a test that runs
// schedulers of its own for the regosched profile (two would compete for
// every pod); StartScheduler starts it again. Meanwhile the waiting helpers
// skip their check that it is alive.
func (s *Stack) StopScheduler() {
	s.mu.Lock()
	p := s.scheduler
	s.scheduler = nil
	s.mu.Unlock()
	if p != nil {
		p.Stop()
		s.log.Info("kube-scheduler stopped")
	}
}

// StartScheduler starts the stack's kube-scheduler, with the configuration
// of the current variant, unless it runs.
func (s *Stack) StartScheduler(ctx context.Context) error {
	s.mu.Lock()
	running := s.scheduler != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	return s.startScheduler(ctx)
}

// SchedulerConfig returns the deployed scheduler configuration
// (Options.SchedulerConfig, else deploy/scheduler/kube-scheduler-config.yaml)
// adapted to this stack as Start runs it (less bindVerb in the NoBindVerb
// variant): the cluster's kubeconfig, no leader election, the extender's
// urlPrefix pointing at this stack's regosched (and, in the TLS variant,
// its tlsConfig).
func (s *Stack) SchedulerConfig() ([]byte, error) {
	base, err := s.baseSchedulerConfig()
	if err != nil {
		return nil, err
	}
	cfg, err := localcluster.SchedulerConfig(base, s.cluster.KubeconfigPath(), s.ExtenderURL())
	if err != nil {
		return nil, err
	}
	return s.schedulerTLS(cfg)
}

// schedulerTLS adds the extender's tlsConfig to cfg when the stack runs the
// TLS variant, and returns cfg unchanged otherwise.
func (s *Stack) schedulerTLS(cfg []byte) ([]byte, error) {
	s.mu.Lock()
	on := s.variant.TLS
	var f TLSFiles
	var err error
	if on {
		f, err = s.tlsFilesLocked()
	}
	s.mu.Unlock()
	if !on {
		return cfg, nil
	}
	if err != nil {
		return nil, err
	}
	return withTLS(cfg, f)
}

// ExtenderProcess returns the running regosched process, nil while it is
// stopped.
func (s *Stack) ExtenderProcess() *localcluster.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.extender
}

// Client returns an admin clientset.
func (s *Stack) Client() kubernetes.Interface { return s.cluster.Client() }

// Cluster returns the underlying control plane.
func (s *Stack) Cluster() *localcluster.Cluster { return s.cluster }

// RepoRoot returns the checkout the stack was built from.
func (s *Stack) RepoRoot() string { return s.root }

// BaseURL is regosched's address, e.g. http://127.0.0.1:41234, or
// https://127.0.0.1:41234 in the TLS variant.
func (s *Stack) BaseURL() string { return s.scheme() + "://" + s.listen }

// Binary is the regosched binary the stack runs, for tests of its other
// commands.
func (s *Stack) Binary() string { return s.extBin }

// ExtenderURL is the urlPrefix kube-scheduler calls.
func (s *Stack) ExtenderURL() string { return s.BaseURL() + "/scheduler" }

// StopExtender stops regosched (kube-scheduler keeps running and, with
// ignorable: false, can place no pod of its profile until StartExtender).
func (s *Stack) StopExtender() {
	s.mu.Lock()
	p := s.extender
	s.extender = nil
	s.mu.Unlock()
	if p != nil {
		p.Stop()
		s.log.Info("regosched stopped")
	}
}

// StartExtender starts regosched on the stack's port (the one the scheduler
// calls) and waits until /readyz answers 200. It does nothing when
// regosched is running.
func (s *Stack) StartExtender(ctx context.Context) error {
	s.mu.Lock()
	running := s.extender != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	args := []string{"serve",
		"--listen", s.listen,
		"--kubeconfig", s.cluster.KubeconfigPath(),
		"--log-level", "debug",
		// As deploy/ runs it: the scheduler configuration the chart
		// renders has no prioritizeVerb.
		"--soft-rules=filter",
	}
	if s.policyPath != "" {
		args = append(args, "--policy", s.policyPath)
	}
	s.mu.Lock()
	if s.variant.TLS {
		f, err := s.tlsFilesLocked()
		if err != nil {
			s.mu.Unlock()
			return err
		}
		args = append(args, tlsExtenderArgs(f)...)
	}
	args = append(args, s.variant.ExtenderArgs...)
	s.mu.Unlock()
	p, err := s.cluster.StartProcess(ctx, extenderName, s.extBin, args...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.extender = p
	s.mu.Unlock()

	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("regosched exited: %w\n%s", p.Err(), tail(p.LogPath, 20))
		default:
		}
		code, _, err := s.get(ctx, "/readyz")
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		// Leave the stack in the "stopped" state, so that a later
		// StartExtender tries again rather than trusting this process.
		s.StopExtender()
		return fmt.Errorf("waiting for regosched /readyz: %w", err)
	}
	s.log.WithField("url", s.BaseURL()).Info("regosched ready")
	return nil
}

// CPUProfile records a pprof CPU profile of regosched over the given
// duration (whole seconds); regosched must run with --profiling.
func (s *Stack) CPUProfile(ctx context.Context, d time.Duration) ([]byte, error) {
	code, body, err := s.get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(d.Seconds()))))
	if err != nil {
		return nil, fmt.Errorf("regosched CPU profile: %w", err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("regosched CPU profile: status %d: %s", code, body)
	}
	return body, nil
}

// get fetches path from regosched and returns the status and body.
func (s *Stack) get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.BaseURL()+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// LogPaths returns the log files of regosched and kube-scheduler (both
// runs of regosched go to the same file), in the cluster folder, which Stop
// removes.
func (s *Stack) LogPaths() map[string]string {
	if s.cluster == nil {
		return nil
	}
	return map[string]string{
		extenderName:  filepath.Join(s.cluster.Dir(), extenderName+".log"),
		schedulerName: filepath.Join(s.cluster.Dir(), schedulerName+".log"),
	}
}

// LogTails returns the last n lines of the regosched and kube-scheduler
// logs, for post-mortems of a failed test; call it before Stop.
func (s *Stack) LogTails(n int) string {
	var b strings.Builder
	paths := s.LogPaths()
	for _, name := range []string{extenderName, schedulerName} {
		if p, ok := paths[name]; ok {
			fmt.Fprintf(&b, "--- end of %s ---\n%s\n", p, tail(p, n))
		}
	}
	return b.String()
}

// Stop stops kube-scheduler, regosched and the control plane and removes
// their files. It is safe to call more than once, and on a partly started
// stack.
func (s *Stack) Stop() {
	s.stopOnce.Do(func() {
		// The cluster stops every process it started (the scheduler before
		// the extender, newest first), restarted extenders included.
		if s.cluster != nil {
			s.cluster.Stop()
		}
		if s.binDir != "" {
			if err := os.RemoveAll(s.binDir); err != nil {
				s.log.WithError(err).Warn("removing binary folder")
			}
		}
	})
}

// freePort returns a TCP port free on 127.0.0.1 right now. regosched keeps
// it across restarts, since the scheduler's configuration names it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n lines of the file at path, or why it cannot.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "(no log)"
		}
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
