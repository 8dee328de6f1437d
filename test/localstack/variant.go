package localstack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/regosched/regosched/test/localcluster"
)

// Variant is a configuration of the scheduler and of regosched that tests
// switch to (see Options.NoBindVerb and Options.ExtenderArgs). The zero
// value is the deployed configuration.
type Variant struct {
	// NoBindVerb removes bindVerb from the scheduler's extender entry.
	NoBindVerb bool
	// ExtenderArgs are extra arguments of regosched serve.
	ExtenderArgs []string
	// TLS runs regosched over mutual TLS: it serves HTTPS with a
	// certificate for 127.0.0.1 and requires a client certificate, and the
	// scheduler calls it with enableHTTPS and a tlsConfig (the stack's CA
	// and a client certificate; see TLSFiles). The stack's own requests
	// (readiness, metrics) present the same client certificate.
	TLS bool
}

// String describes v for logs, e.g. "bindVerb off, regosched --inflight-wait=0".
func (v Variant) String() string {
	d := "bindVerb on"
	if v.NoBindVerb {
		d = "bindVerb off"
	}
	if v.TLS {
		d += ", mutual TLS"
	}
	if len(v.ExtenderArgs) > 0 {
		d += ", regosched " + strings.Join(v.ExtenderArgs, " ")
	}
	return d
}

// Variant returns the configuration the stack runs now.
func (s *Stack) Variant() Variant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Variant{NoBindVerb: s.variant.NoBindVerb, ExtenderArgs: slices.Clone(s.variant.ExtenderArgs), TLS: s.variant.TLS}
}

// SetExtenderArgs replaces the extra arguments of regosched serve; they
// take effect at the next StartExtender.
func (s *Stack) SetExtenderArgs(args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.variant.ExtenderArgs = slices.Clone(args)
}

// Reconfigure restarts kube-scheduler and regosched with v: it stops the
// scheduler (so that nothing is scheduled half-way), restarts regosched
// with v's arguments on the same port, waits until it is ready, then starts
// a scheduler with v's configuration. Pods created meanwhile wait in the
// new scheduler's queue. The control plane and its objects stay.
func (s *Stack) Reconfigure(ctx context.Context, v Variant) error {
	s.mu.Lock()
	sched := s.scheduler
	s.scheduler = nil
	s.variant = Variant{NoBindVerb: v.NoBindVerb, ExtenderArgs: slices.Clone(v.ExtenderArgs), TLS: v.TLS}
	s.mu.Unlock()
	if sched != nil {
		sched.Stop()
	}
	s.StopExtender()
	if err := s.StartExtender(ctx); err != nil {
		return err
	}
	if err := s.startScheduler(ctx); err != nil {
		return err
	}
	s.log.WithField("variant", v.String()).Info("stack reconfigured")
	return nil
}

// withoutBindVerb removes bindVerb from every extender entry of a
// KubeSchedulerConfiguration (as SchedulerConfig returns it), on the
// parsed document.
func withoutBindVerb(cfg []byte) ([]byte, error) {
	return localcluster.EditExtenders(cfg, "bindVerb to remove, but", func(ext map[string]any) { delete(ext, "bindVerb") })
}

// Replica is an extra regosched process started by StartReplica.
type Replica struct {
	*localcluster.Process
	// BaseURL is its address, e.g. http://127.0.0.1:41235.
	BaseURL string
}

// Kill ends the replica with SIGKILL, as a crash would (a leader releases
// no Lease), and returns once it is reaped.
func (r *Replica) Kill() error {
	if err := localcluster.KillGroup(r.PID()); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s: %w", r.Name, err)
	}
	<-r.Done()
	return nil
}

// LogTail returns the last n lines of the replica's log.
func (r *Replica) LogTail(n int) string { return tail(r.LogPath, n) }

// StartReplica starts one more regosched from the stack's binary and
// kubeconfig, on a port of its own, with args added to serve's (e.g.
// "--leader-elect"). No scheduler calls it. It does not wait for
// readiness, which takes a moment (the caches sync first; with
// --leader-elect every synced replica is ready, leader or not, while only
// the leader answers the verbs). name names its log file in the cluster
// folder; Stop the replica or the stack.
func (s *Stack) StartReplica(ctx context.Context, name string, args ...string) (*Replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return s.StartReplicaAt(ctx, name, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), args...)
}

// StartReplicaAt is StartReplica on a given address (host:port), e.g. the
// port a test declared in a Pod object before starting its process.
func (s *Stack) StartReplicaAt(ctx context.Context, name, listen string, args ...string) (*Replica, error) {
	all := append([]string{"serve",
		"--listen", listen,
		"--kubeconfig", s.cluster.KubeconfigPath(),
		"--log-level", "debug",
	}, args...)
	p, err := s.cluster.StartProcess(ctx, name, s.extBin, all...)
	if err != nil {
		return nil, err
	}
	return &Replica{Process: p, BaseURL: "http://" + listen}, nil
}

// Metrics returns regosched's /metrics in Prometheus text format.
func (s *Stack) Metrics(ctx context.Context) ([]byte, error) {
	code, body, err := s.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping regosched metrics: %w", err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("scraping regosched metrics: status %d", code)
	}
	return body, nil
}

// Bucket is a cumulative histogram bucket: Count observations <= LE.
type Bucket struct {
	LE    float64 // +Inf for the last
	Count uint64
}

// Histogram is an unlabelled Prometheus histogram.
type Histogram struct {
	Sum     float64
	Count   uint64
	Buckets []Bucket // ascending LE
}

// Sub returns h minus an earlier scrape of the same histogram.
func (h Histogram) Sub(earlier Histogram) Histogram {
	out := Histogram{Sum: h.Sum - earlier.Sum, Count: h.Count - earlier.Count}
	for _, b := range h.Buckets {
		for _, e := range earlier.Buckets {
			if e.LE == b.LE {
				b.Count -= e.Count
				break
			}
		}
		out.Buckets = append(out.Buckets, b)
	}
	return out
}

// Mean is Sum/Count, 0 with no observations.
func (h Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// String is e.g. "count 30, sum 0.412s, mean 13.7ms; <=0.5ms: 12, <=1.25ms: 3, ...",
// the buckets as non-cumulative counts.
func (h Histogram) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "count %d, sum %.4fs, mean %.2fms;", h.Count, h.Sum, h.Mean()*1000)
	var prev uint64
	for _, bk := range h.Buckets {
		le := "+Inf"
		if !math.IsInf(bk.LE, 1) {
			le = strconv.FormatFloat(bk.LE*1000, 'g', 4, 64) + "ms"
		}
		fmt.Fprintf(&b, " <=%s: %d,", le, bk.Count-prev)
		prev = bk.Count
	}
	return strings.TrimSuffix(b.String(), ",")
}

// ParseHistogram finds the unlabelled histogram name in Prometheus text
// format.
func ParseHistogram(body []byte, name string) (Histogram, error) {
	var h Histogram
	found := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		key, val := fields[0], fields[1]
		switch {
		case key == name+"_sum":
			v, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return h, fmt.Errorf("metric %s: %w", key, err)
			}
			h.Sum, found = v, true
		case key == name+"_count":
			v, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return h, fmt.Errorf("metric %s: %w", key, err)
			}
			h.Count, found = uint64(v), true
		case strings.HasPrefix(key, name+`_bucket{le="`):
			le := strings.TrimSuffix(strings.TrimPrefix(key, name+`_bucket{le="`), `"}`)
			bound, err := strconv.ParseFloat(le, 64) // accepts "+Inf"
			if err != nil {
				return h, fmt.Errorf("metric %s: %w", key, err)
			}
			v, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return h, fmt.Errorf("metric %s: %w", key, err)
			}
			h.Buckets = append(h.Buckets, Bucket{LE: bound, Count: uint64(v)})
		}
	}
	if err := sc.Err(); err != nil {
		return h, fmt.Errorf("reading metrics: %w", err)
	}
	if !found {
		return h, fmt.Errorf("histogram %s not exposed", name)
	}
	slices.SortFunc(h.Buckets, func(a, b Bucket) int {
		switch {
		case a.LE < b.LE:
			return -1
		case a.LE > b.LE:
			return 1
		}
		return 0
	})
	return h, nil
}

// Histogram scrapes the histogram name from regosched's /metrics.
func (s *Stack) Histogram(ctx context.Context, name string) (Histogram, error) {
	body, err := s.Metrics(ctx)
	if err != nil {
		return Histogram{}, err
	}
	return ParseHistogram(body, name)
}
