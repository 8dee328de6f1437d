package benche2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/test/localcluster"
	ls "github.com/regosched/regosched/test/localstack"
)

// Options configures Run.
type Options struct {
	// Points are the cluster sizes to measure, measured in order of
	// their node count (nodes are only ever added); DefaultPoints when
	// empty.
	Points []Point
	// Workload is what to schedule in each measurement.
	Workload Workload
	// Modes are the configurations to measure, in this order; all when
	// empty.
	Modes []Mode
	// Rounds measures every configuration this many times at each point,
	// in turns (a, b, c, a, b, c, ...), so that a slow minute of a shared
	// machine does not land on one configuration; the result line gives
	// medians. Default 1.
	Rounds int
	// Timeout bounds each measurement's wait for every pod to be bound.
	Timeout time.Duration
	// ClientQPS is the client rate limit (QPS, and twice as much burst)
	// of kube-scheduler (clientConnection) and of regosched
	// (--kube-api-qps), the same for every configuration. 0 keeps their
	// defaults: 50/100 for kube-scheduler, 100/200 for regosched.
	ClientQPS int
	// NodeWorkers and CreateWorkers bound concurrent requests while
	// creating nodes and pods.
	NodeWorkers   int
	CreateWorkers int
	// ProfileDir, when set, receives CPU profiles of regosched (run with
	// --profiling) over its measurement, one file per profileChunk, named
	// for the run: regosched-a0-cpu-00.pprof is the first of point 0; and
	// of regosched-scheduler over its whole run, regosched-scheduler-f0.pprof.
	ProfileDir string
	// Out receives the detail lines and a result line per point.
	Out io.Writer
	// PlotPath, when set, receives a picture of the results: pods per
	// second against bound pods, a line per configuration (.png or .svg).
	PlotPath string
	// PluginScheduler is the regosched-scheduler binary ModePlugin runs;
	// built from the checkout when empty.
	PluginScheduler string
	// Log receives progress messages; nil discards them.
	Log logrus.FieldLogger
}

// verbMetric is regosched's per-verb latency histogram; waitMetric the
// time filter calls waited for peers in flight.
const (
	verbMetric = "regosched_request_duration_seconds"
	waitMetric = "regosched_inflight_wait_seconds"
)

// Run starts the stack and, point by point, adds nodes up to the point's
// size and measures each configuration on it with fresh namespaces and the
// point's pre-bound pods; it writes details and a result line per point to
// opts.Out, draws the picture, and stops everything. A configuration that
// times out is reported with what was bound; Run then returns an error
// after printing the result lines.
func Run(ctx context.Context, opts Options) error {
	if err := opts.Workload.Validate(); err != nil {
		return err
	}
	points := slices.Clone(opts.Points)
	if len(points) == 0 {
		points = slices.Clone(DefaultPoints)
	}
	slices.SortStableFunc(points, func(a, b Point) int { return cmp.Compare(a.Nodes, b.Nodes) })
	for _, pt := range points {
		if err := pt.Validate(); err != nil {
			return err
		}
		// Fake nodes allow 110 pods each.
		if pods := pt.Bound + opts.Workload.Size(); pods > 100*pt.Nodes {
			return fmt.Errorf("point %+v: %d pods do not fit on %d nodes", pt, pods, pt.Nodes)
		}
	}
	modes := opts.Modes
	if len(modes) == 0 {
		modes = Modes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.CreateWorkers <= 0 {
		opts.CreateWorkers = 16
	}
	if opts.NodeWorkers <= 0 {
		opts.NodeWorkers = 32
	}
	log := opts.Log
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	printf := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	// regosched as deployed (log level info), with the same client rate
	// limit as the scheduler.
	extArgs := []string{"--log-level=info"}
	if opts.ProfileDir != "" {
		// Made up front: failing to write profiles after the run would waste it.
		if err := os.MkdirAll(opts.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("profile folder: %w", err)
		}
		extArgs = append(extArgs, "--profiling")
	}
	if opts.ClientQPS > 0 {
		extArgs = append(extArgs,
			"--kube-api-qps="+strconv.Itoa(opts.ClientQPS),
			"--kube-api-burst="+strconv.Itoa(2*opts.ClientQPS))
	}
	if slices.Contains(modes, ModePlugin) && opts.PluginScheduler == "" {
		t := time.Now()
		dir, err := os.MkdirTemp("", "regosched-scheduler-")
		if err != nil {
			return fmt.Errorf("regosched-scheduler: %w", err)
		}
		defer os.RemoveAll(dir)
		root, err := localcluster.FindRepoRoot()
		if err != nil {
			return err
		}
		opts.PluginScheduler = filepath.Join(dir, "regosched-scheduler")
		log.Info("building regosched-scheduler")
		if err := ls.BuildPluginScheduler(ctx, root, opts.PluginScheduler); err != nil {
			return err
		}
		printf("phase: regosched-scheduler built in %s", time.Since(t).Round(time.Millisecond))
	}
	t0 := time.Now()
	log.Info("building and starting etcd, kube-apiserver and regosched (no scheduler yet)")
	stack, err := ls.Start(ctx, ls.Options{
		Nodes: 0, NoScheduler: true, NodeWorkers: opts.NodeWorkers, ExtenderArgs: extArgs, Log: log,
	})
	if err != nil {
		return fmt.Errorf("starting the stack: %w", err)
	}
	defer stack.Stop()
	printf("phase: stack start (builds, etcd, kube-apiserver, regosched): %s", time.Since(t0).Round(time.Millisecond))

	b := &bench{opts: opts, stack: stack, log: log, printf: printf}
	var nodes []string
	var done []PointResult
	var failed error
	for i, pt := range points {
		if add := pt.Nodes - len(nodes); add > 0 {
			t1 := time.Now()
			names, err := stack.Cluster().AddNodes(ctx, add)
			if err != nil {
				return err
			}
			nodes = append(nodes, names...)
			d := time.Since(t1)
			printf("phase: %d nodes created in %s (%.0f nodes/s, %d workers, create + status update each)",
				add, d.Round(time.Millisecond), float64(add)/d.Seconds(), opts.NodeWorkers)
		}
		pr := PointResult{Point: Point{Nodes: len(nodes), Bound: pt.Bound}, Pods: opts.Workload.Size()}
		for round := range max(opts.Rounds, 1) {
			for _, m := range modes {
				// A fresh regosched for each configuration that has one
				// (measure starts it), none for the others: it would watch
				// (and spend CPU on) their pods.
				stack.StopExtender()
				args := extArgs
				if m == ModeRegoschedPrioritize {
					args = append(slices.Clone(extArgs), "--soft-rules=prioritize")
				}
				stack.SetExtenderArgs(args)
				run := fmt.Sprintf("%s%d", m, i)
				if round > 0 {
					run += fmt.Sprintf("r%d", round)
				}
				r, err := b.measure(ctx, m, run, pt.Bound, nodes)
				if err != nil {
					return fmt.Errorf("nodes=%d bound=%d: configuration %s (%s): %w", pr.Nodes, pr.Bound, m, m.Name(), err)
				}
				for _, l := range r.Details() {
					printf("nodes=%d bound=%d round=%d %s", pr.Nodes, pr.Bound, round+1, l)
				}
				if r.TimedOut {
					failed = errors.Join(failed, fmt.Errorf("nodes=%d bound=%d: configuration %s (%s) timed out: %d of %d pods bound",
						pr.Nodes, pr.Bound, m, m.Name(), r.Bound, r.Pods))
				}
				pr.Results = append(pr.Results, r)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		printf("nodes=%d bound=%d rates in pods/s, round by round: %s", pr.Nodes, pr.Bound, pr.Rounds())
		done = append(done, pr)
		// Every line so far again, so that the last lines are the whole
		// result even when details came in between.
		for _, d := range done {
			printf("%s", d.Line())
		}
	}
	if opts.PlotPath != "" {
		if err := WritePlot(opts.PlotPath, done); err != nil {
			return errors.Join(failed, err)
		}
		printf("picture: %s", opts.PlotPath)
	}
	return failed
}

type bench struct {
	opts   Options
	stack  *ls.Stack
	null   *nullExtender // while ModeNullExtender is measured
	log    logrus.FieldLogger
	printf func(string, ...any)
}

// measure runs one configuration as the run named run: fresh namespaces,
// prebound pods placed on nodes, then every pod to schedule created while
// no scheduler runs, then one kube-scheduler started and timed until every
// pod is bound; then the placement is checked and the pods deleted.
func (b *bench) measure(ctx context.Context, mode Mode, run string, prebound int, nodes []string) (Result, error) {
	w := b.opts.Workload
	client := b.stack.Client()
	log := b.log.WithField("configuration", mode.Name())
	res := Result{Mode: mode, Pods: w.Size()}

	nss := w.NamespaceNames(run)
	for _, ns := range nss {
		if err := b.stack.EnsureNamespace(ctx, ns); err != nil {
			return res, err
		}
	}
	// Bound before regosched starts (Run stops it between configurations):
	// it is ready only once it has listed them, so describing them is no
	// part of the measurement.
	if prebound > 0 {
		pre, err := w.Prebound(mode, run, prebound, nodes)
		if err != nil {
			return res, err
		}
		t := time.Now()
		if err := createPods(ctx, client, pre, b.opts.CreateWorkers, log); err != nil {
			return res, err
		}
		b.printf("phase: %s: %d pods pre-bound in %s", mode.Name(), len(pre), time.Since(t).Round(time.Millisecond))
	}
	watch, err := startBindWatch(ctx, client, run, w.Size())
	if err != nil {
		return res, err
	}
	defer watch.stop()

	var verbsBefore []VerbTime
	if mode.IsRegosched() {
		if err := b.stack.StartExtender(ctx); err != nil {
			return res, err
		}
		if verbsBefore, err = b.verbTimes(ctx); err != nil {
			return res, err
		}
	}

	// Every pod first, with no scheduler running.
	pods := w.Pods(mode, run)
	log.WithField("pods", len(pods)).Info("creating pods")
	createPIDs := b.pids()
	atCreate := cpuSnapshot(createPIDs)
	res.CreateStart = time.Now()
	if err := createPods(ctx, client, pods, b.opts.CreateWorkers, log); err != nil {
		return res, err
	}
	res.CreateEnd = time.Now()
	if n := watch.boundCount(); n > 0 {
		return res, fmt.Errorf("%d pods were bound before any scheduler ran", n)
	}

	// Then one scheduler, timed.
	if mode == ModeNullExtender {
		if b.null, err = startNullExtender(b.log.WithField("component", "null-extender")); err != nil {
			return res, err
		}
		defer func() { b.null.stop(); b.null = nil }()
	}
	cfg, err := b.schedulerConfig(mode)
	if err != nil {
		return res, err
	}
	pids := b.pids()
	before := cpuSnapshot(pids)
	res.CreateCPU = cpuDelta([]string{"kube-apiserver", "etcd", "regosched", "bench"}, atCreate, cpuSnapshot(createPIDs))
	log.Info("starting kube-scheduler")
	res.SchedStart = time.Now()
	bin := b.stack.Cluster().Binaries().KubeScheduler
	var env []string
	if mode == ModePlugin {
		bin = b.opts.PluginScheduler
		if b.opts.ProfileDir != "" {
			// Written when the scheduler stops, at the end of measure.
			env = append(env, "REGOSCHED_CPU_PROFILE="+filepath.Join(b.opts.ProfileDir, "regosched-scheduler-"+run+".pprof"))
		}
	}
	sched, err := b.stack.Cluster().StartSchedulerBinary(ctx, bin, cfg, env...)
	if err != nil {
		return res, err
	}
	defer sched.Stop()
	pids["kube-scheduler"] = sched.PID()
	before["kube-scheduler"] = 0 // a new process: its start-up counts

	if mode.IsRegosched() && b.opts.ProfileDir != "" {
		profCtx, stopProf := context.WithCancel(ctx)
		profDone := b.profile(profCtx, run)
		defer func() { stopProf(); <-profDone }()
	}
	timer := time.NewTimer(b.opts.Timeout)
	defer timer.Stop()
	stopProgress := progress(log, progressEvery, "pods bound", w.Size(), watch.boundCount)
	defer stopProgress()
	select {
	case <-watch.allBound:
	case <-timer.C:
		res.TimedOut = true
	case <-sched.Done():
		return res, fmt.Errorf("kube-scheduler exited: %w (log %s)", sched.Err(), sched.LogPath)
	case <-ctx.Done():
		return res, ctx.Err()
	}
	after := cpuSnapshot(pids)
	res.Bound, res.FirstBound, res.LastBound = watch.result()
	if res.TimedOut {
		res.LastBound = time.Now()
	}
	res.CPU = cpuDelta([]string{"kube-apiserver", "etcd", "kube-scheduler", "regosched", "bench"}, before, after)
	if mode.IsRegosched() {
		after, err := b.verbTimes(ctx)
		if err != nil {
			return res, err
		}
		res.Verbs = SubVerbTimes(after, verbsBefore)
	}
	sched.Stop()
	log.WithFields(logrus.Fields{"bound": res.Bound, "took": res.LastBound.Sub(res.SchedStart).Round(time.Millisecond)}).Info("scheduling done")

	// The independent check, on the API server's final word.
	t := time.Now()
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: LabelRun + "=" + run})
	if err != nil {
		return res, fmt.Errorf("listing pods: %w", err)
	}
	bound := 0
	for i := range list.Items {
		if list.Items[i].Spec.NodeName != "" {
			bound++
		}
	}
	if bound != res.Bound {
		log.Warnf("the watch saw %d pods bound, the API server lists %d", res.Bound, bound)
	}
	zoneOf, err := nodeZones(ctx, client)
	if err != nil {
		return res, err
	}
	res.Violations = Violations(list.Items, zoneOf)
	checkTook := time.Since(t)

	// Leave an empty cluster to the next configuration.
	t = time.Now()
	if err := deletePods(ctx, client, nss); err != nil {
		return res, err
	}
	b.printf("phase: %s: check %s, delete %d pods %s", mode.Name(), checkTook.Round(time.Millisecond), len(list.Items)+prebound, time.Since(t).Round(time.Millisecond))
	return res, nil
}

// createPods creates pods with at most workers requests at once, saying how
// far it has got every progressEvery.
func createPods(ctx context.Context, client kubernetes.Interface, pods []*corev1.Pod, workers int, log logrus.FieldLogger) error {
	var created atomic.Int64
	stop := progress(log, progressEvery, "pods created", len(pods), func() int { return int(created.Load()) })
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, p := range pods {
		g.Go(func() error {
			if _, err := client.CoreV1().Pods(p.Namespace).Create(gctx, p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			created.Add(1)
			return nil
		})
	}
	return g.Wait()
}

// schedulerConfig is the KubeSchedulerConfiguration of mode: the deployed
// one for regosched (with prioritizeVerb for ModeRegoschedPrioritize) and
// for regosched-scheduler, one bare profile otherwise; the client rate
// limit of Options.ClientQPS in each.
func (b *bench) schedulerConfig(mode Mode) ([]byte, error) {
	var doc map[string]any
	switch {
	case mode.IsRegosched() || mode == ModeNullExtender || mode == ModePlugin:
		cfg, err := b.deployedConfig(mode)
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(cfg, &doc); err != nil {
			return nil, fmt.Errorf("scheduler config: %w", err)
		}
	default:
		doc = PlainSchedulerConfig(b.stack.Cluster().KubeconfigPath(), mode.SchedulerName())
	}
	if b.opts.ClientQPS > 0 {
		conn, _ := doc["clientConnection"].(map[string]any)
		if conn == nil {
			return nil, errors.New("scheduler config: no clientConnection")
		}
		conn["qps"] = b.opts.ClientQPS
		conn["burst"] = 2 * b.opts.ClientQPS
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return out, nil
}

// deployedConfig is the deployed configuration of mode, adapted to the
// stack: deploy/plugin's for regosched-scheduler, deploy/scheduler's
// otherwise, with prioritizeVerb for ModeRegoschedPrioritize and the null
// extender's URL for ModeNullExtender.
func (b *bench) deployedConfig(mode Mode) ([]byte, error) {
	if mode == ModePlugin {
		return ls.PluginSchedulerConfig(b.stack.RepoRoot(), b.stack.Cluster().KubeconfigPath())
	}
	cfg, err := b.stack.SchedulerConfig()
	if err != nil {
		return nil, err
	}
	switch mode {
	case ModeRegoschedPrioritize:
		return localcluster.EditExtenders(cfg, "an extender for prioritize, but", func(ext map[string]any) {
			ext["prioritizeVerb"] = "prioritize"
			if _, ok := ext["weight"]; !ok {
				ext["weight"] = 5
			}
		})
	case ModeNullExtender:
		return nullExtenderConfig(cfg, b.null.url, mode.SchedulerName())
	}
	return cfg, nil
}

// PlainSchedulerConfig is a KubeSchedulerConfiguration with one default
// profile named schedulerName and no extender.
func PlainSchedulerConfig(kubeconfig, schedulerName string) map[string]any {
	return map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		"leaderElection":   map[string]any{"leaderElect": false},
		"profiles":         []any{map[string]any{"schedulerName": schedulerName}},
	}
}

// pids are the processes whose CPU time is measured: the control plane,
// regosched when it runs, and this process (its watch).
func (b *bench) pids() map[string]int {
	out := map[string]int{"bench": os.Getpid()}
	for _, p := range b.stack.Cluster().Processes() {
		select {
		case <-p.Done():
			continue
		default:
		}
		switch p.Name {
		case "etcd", "kube-apiserver":
			out[p.Name] = p.PID()
		}
	}
	if p := b.stack.ExtenderProcess(); p != nil {
		out["regosched"] = p.PID()
	}
	return out
}

// profileChunk is the length of one regosched CPU profile: short, so that
// little of the measurement is lost at its end; pprof merges the files.
const profileChunk = 3 * time.Second

// profile writes regosched CPU profiles of run to ProfileDir, one per
// profileChunk, until ctx ends (the chunk under way then is lost). The
// returned channel is closed when it has stopped.
func (b *bench) profile(ctx context.Context, run string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			data, err := b.stack.CPUProfile(ctx, profileChunk)
			if err != nil {
				if ctx.Err() == nil {
					b.log.WithError(err).Warn("profiling regosched")
				}
				return
			}
			path := filepath.Join(b.opts.ProfileDir, fmt.Sprintf("regosched-%s-cpu-%02d.pprof", run, i))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				b.log.WithError(err).Warn("writing a regosched profile")
				return
			}
		}
	}()
	return done
}

// verbTimes are regosched's time per verb, and last, as the "verb"
// "filter-inflight-wait", the part of filter spent waiting for peers in
// flight.
func (b *bench) verbTimes(ctx context.Context) ([]VerbTime, error) {
	body, err := b.stack.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	verbs, err := ParseVerbTimes(body, verbMetric)
	if err != nil {
		return nil, err
	}
	waits, err := ParseVerbTimes(body, waitMetric)
	if err != nil {
		return nil, err
	}
	for _, w := range waits {
		w.Verb = "filter-inflight-wait"
		verbs = append(verbs, w)
	}
	return verbs, nil
}

// Violations is the independent check of a final placement, the default
// policy's hard rules restated in plain Go: localstack.Violations per node
// (Redis masters of a cluster apart, master and replica of a shard apart,
// Elasticsearch data pods of a cluster apart) and localstack.ZoneViolations
// per zone (master and replica of a shard apart, fewer than half of a
// cluster's masters in one zone), zones read from zoneOf (node -> zone).
func Violations(pods []corev1.Pod, zoneOf map[string]string) []string {
	return slices.Concat(ls.Violations(pods), ls.ZoneViolations(pods, zoneOf))
}

// nodeZones maps every node to its zone label.
func nodeZones(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make(map[string]string, len(list.Items))
	for _, n := range list.Items {
		if z, ok := n.Labels[localcluster.LabelZone]; ok {
			out[n.Name] = z
		}
	}
	return out, nil
}

// deletePods deletes every pod of the namespaces at once (no kubelet runs
// to finish a graceful deletion) and waits until none is left.
func deletePods(ctx context.Context, client kubernetes.Interface, nss []string) error {
	zero := int64(0)
	for _, ns := range nss {
		err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("deleting pods of %s: %w", ns, err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, ns := range nss {
			list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return false, fmt.Errorf("listing pods of %s: %w", ns, err)
			}
			if len(list.Items) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the pods of %v to go: %w", nss, err)
	}
	return nil
}

// bindWatch records when each pod of a run is first seen bound.
type bindWatch struct {
	stopCh   chan struct{}
	allBound chan struct{} // closed once total pods are bound

	mu          sync.Mutex
	total       int
	bound       map[types.UID]struct{}
	first, last time.Time
}

func startBindWatch(ctx context.Context, client kubernetes.Interface, run string, total int) (*bindWatch, error) {
	w := &bindWatch{
		stopCh:   make(chan struct{}),
		allBound: make(chan struct{}),
		total:    total,
		bound:    map[types.UID]struct{}{},
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelRun + "=" + run }))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.see,
		UpdateFunc: func(_, obj any) { w.see(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	f.Start(w.stopCh)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		w.stop()
		return nil, errors.New("watching pods: cache did not sync")
	}
	return w, nil
}

func (w *bindWatch) see(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.bound[p.UID]; seen {
		return
	}
	w.bound[p.UID] = struct{}{}
	if w.first.IsZero() {
		w.first = now
	}
	w.last = now
	if len(w.bound) == w.total {
		close(w.allBound)
	}
}

func (w *bindWatch) boundCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound)
}

func (w *bindWatch) result() (bound int, first, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound), w.first, w.last
}

func (w *bindWatch) stop() {
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
}
