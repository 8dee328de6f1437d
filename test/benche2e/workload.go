// Package benche2e is regosched's end-to-end throughput benchmark
// (test/cmd/regosched-bench-e2e, `make bench-e2e`): on one local control plane
// (test/localstack) it schedules the same mixed Redis/Elasticsearch
// workload three ways — kube-scheduler with regosched as extender, plain
// kube-scheduler with the equivalent native required pod anti-affinity,
// and plain kube-scheduler with no rules — and reports pods bound per
// second, an independent count of broken placement rules, and the CPU time
// each process spent.
package benche2e

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localcluster"
	ls "github.com/regosched/regosched/test/localstack"
)

// LabelRun marks every pod of one measurement, so that a watch sees those
// and nothing else.
const LabelRun = "regosched.io/bench-run"

// Mode is one of the measured configurations.
type Mode string

// The configurations, in the order Run measures them.
const (
	// ModeRegosched is kube-scheduler with the deployed configuration:
	// regosched as extender (filter, prioritize, preempt, bind).
	ModeRegosched Mode = "a"
	// ModeNative is kube-scheduler alone, the rules written as required
	// pod anti-affinity in every pod.
	ModeNative Mode = "b"
	// ModeNoRules is kube-scheduler alone, no rules: the ceiling.
	ModeNoRules Mode = "c"
	// ModeNullExtender is a reference, not one of the three compared
	// configurations: kube-scheduler with the deployed extender settings
	// (filter and prioritize, nodeCacheCapable) calling an extender that
	// does no work (every node passes, no scores), the scheduler binding.
	// It is the cost of the extender protocol itself: no extender can be
	// faster on this control plane.
	ModeNullExtender Mode = "d"
	// ModeRegoschedPrioritize is regosched with its soft rules scored in
	// prioritize (--soft-rules=prioritize, prioritizeVerb in the
	// scheduler's extender entry), measured only when asked for: the
	// same-run baseline of folding them into filter.
	ModeRegoschedPrioritize Mode = "e"
	// ModePlugin is regosched-scheduler: kube-scheduler with regosched
	// built in as a framework plugin (deploy/plugin/), no extender.
	ModePlugin Mode = "f"
)

// Modes lists the compared modes in measuring order; the references
// ModeNullExtender and ModeRegoschedPrioritize are measured only when
// asked for.
var Modes = []Mode{ModeRegosched, ModePlugin, ModeNative, ModeNoRules}

// ParseMode accepts a, b, c, d, e, f or the names regosched, native,
// norules, null-extender, regosched-prioritize, regosched-scheduler.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "a", "regosched":
		return ModeRegosched, nil
	case "b", "native":
		return ModeNative, nil
	case "c", "norules", "no-rules":
		return ModeNoRules, nil
	case "d", "null-extender":
		return ModeNullExtender, nil
	case "e", "regosched-prioritize":
		return ModeRegoschedPrioritize, nil
	case "f", "regosched-scheduler":
		return ModePlugin, nil
	}
	return "", fmt.Errorf("unknown configuration %q: want a (regosched), b (native), c (norules), d (null-extender), e (regosched-prioritize) or f (regosched-scheduler)", s)
}

// Name is the mode's name in the result line: regosched, native, norules.
func (m Mode) Name() string {
	switch m {
	case ModeRegosched:
		return "regosched"
	case ModeNative:
		return "native"
	case ModeNoRules:
		return "norules"
	case ModeNullExtender:
		return "null-extender"
	case ModeRegoschedPrioritize:
		return "regosched-prioritize"
	case ModePlugin:
		return "regosched-scheduler"
	}
	return string(m)
}

// SchedulerName is the scheduler profile the mode's pods ask for: the
// deployed profile for regosched, one of the benchmark's own otherwise.
func (m Mode) SchedulerName() string {
	if m.IsRegosched() || m == ModePlugin {
		return ls.SchedulerName
	}
	return "bench-" + m.Name()
}

// IsRegosched reports whether regosched decides in mode m.
func (m Mode) IsRegosched() bool { return m == ModeRegosched || m == ModeRegoschedPrioritize }

// Workload is the shape of the pods to schedule.
type Workload struct {
	// RedisClusters each have RedisShards shards of a master and a replica.
	RedisClusters int
	RedisShards   int
	// ESClusters each have ESDataPods data pods.
	ESClusters int
	ESDataPods int
	// Namespaces the clusters are spread over, round robin.
	Namespaces int
}

// DefaultWorkload is 150 Redis clusters × 3 shards × (master + replica)
// and 120 Elasticsearch clusters × 5 data pods: 1,500 pods over 10
// namespaces.
func DefaultWorkload() Workload {
	return Workload{RedisClusters: 150, RedisShards: 3, ESClusters: 120, ESDataPods: 5, Namespaces: 10}
}

// Size is the number of pods.
func (w Workload) Size() int {
	return w.RedisClusters*w.RedisShards*2 + w.ESClusters*w.ESDataPods
}

// Validate rejects a workload with nothing to schedule or no namespace.
func (w Workload) Validate() error {
	if w.RedisClusters < 0 || w.RedisShards < 0 || w.ESClusters < 0 || w.ESDataPods < 0 {
		return fmt.Errorf("workload: negative size in %+v", w)
	}
	if w.Namespaces < 1 {
		return fmt.Errorf("workload: need at least one namespace, got %d", w.Namespaces)
	}
	if w.Size() == 0 {
		return fmt.Errorf("workload: no pods in %+v", w)
	}
	return nil
}

// NamespaceNames are the namespaces of the run named run, e.g.
// bench-a-00..bench-a-09: every run gets fresh ones.
func (w Workload) NamespaceNames(run string) []string {
	out := make([]string, w.Namespaces)
	for i := range out {
		out[i] = fmt.Sprintf("bench-%s-%02d", run, i)
	}
	return out
}

// Pods returns the workload's pods for mode, in namespaces
// NamespaceNames(run), labelled LabelRun=run. Clusters go round robin over
// the namespaces; pods are ordered cluster by cluster. Native mode adds the
// rules as required pod anti-affinity; the others carry none.
func (w Workload) Pods(mode Mode, run string) []*corev1.Pod {
	nss := w.NamespaceNames(run)
	pods := make([]*corev1.Pod, 0, w.Size())
	add := func(p *corev1.Pod) {
		p.Labels[LabelRun] = run
		p.Spec.SchedulerName = mode.SchedulerName()
		if mode == ModeNative {
			p.Spec.Affinity, p.Spec.TopologySpreadConstraints = NativeRules(p.Labels)
		}
		pods = append(pods, p)
	}
	for c := range w.RedisClusters {
		ns, cluster := nss[c%len(nss)], fmt.Sprintf("redis-%03d", c)
		for sh := range w.RedisShards {
			shard := strconv.Itoa(sh)
			add(fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d-master", cluster, sh)).Redis(cluster, "master", shard).Schedulable().Obj())
			add(fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d-replica", cluster, sh)).Redis(cluster, "replica", shard).Schedulable().Obj())
		}
	}
	for c := range w.ESClusters {
		ns, cluster := nss[c%len(nss)], fmt.Sprintf("es-%03d", c)
		for d := range w.ESDataPods {
			add(fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-data-%d", cluster, d)).Elasticsearch(cluster, "data").Schedulable().Obj())
		}
	}
	return pods
}

// NativeRules is the default policy's hard rules for a pod with these
// labels, as kube-scheduler's own required pod anti-affinity and topology
// spread constraints, per node (hostname) and per zone (terms and
// constraints apply in the pod's namespace, which with the instance label
// makes a cluster):
//
//   - a Redis master avoids the masters of its cluster on its node, and the
//     replica of its shard on its node and in its zone; its cluster's
//     masters spread over the zones with a skew of at most 1, which for
//     the workload's 3 masters over 3 zones is the policy's quorum (fewer
//     than half, so one, per zone);
//   - a Redis replica avoids the master of its shard on its node and in
//     its zone;
//   - an Elasticsearch data pod avoids the data pods of its cluster on its
//     node.
//
// Cluster and shard come from matchLabelKeys (GA and locked on since
// Kubernetes 1.33), which the API server merges into the label selector at
// creation. It returns nil, nil for any other pod.
func NativeRules(labels map[string]string) (*corev1.Affinity, []corev1.TopologySpreadConstraint) {
	selector := func(app, role string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{fixture.LabelName: app, fixture.LabelComponent: role}}
	}
	term := func(app, role, topology string, keys ...string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{LabelSelector: selector(app, role), MatchLabelKeys: keys, TopologyKey: topology}
	}
	host, zone := localcluster.LabelHostname, localcluster.LabelZone
	var terms []corev1.PodAffinityTerm
	var spread []corev1.TopologySpreadConstraint
	switch labels[fixture.LabelName] + "/" + labels[fixture.LabelComponent] {
	case "redis/master":
		terms = []corev1.PodAffinityTerm{
			term("redis", "master", host, fixture.LabelInstance),
			term("redis", "replica", host, fixture.LabelInstance, fixture.LabelShard),
			term("redis", "replica", zone, fixture.LabelInstance, fixture.LabelShard),
		}
		spread = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: selector("redis", "master"), MatchLabelKeys: []string{fixture.LabelInstance},
		}}
	case "redis/replica":
		terms = []corev1.PodAffinityTerm{
			term("redis", "master", host, fixture.LabelInstance, fixture.LabelShard),
			term("redis", "master", zone, fixture.LabelInstance, fixture.LabelShard),
		}
	case "elasticsearch/data":
		terms = []corev1.PodAffinityTerm{term("elasticsearch", "data", host, fixture.LabelInstance)}
	default:
		return nil, nil
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: terms,
	}}, spread
}

// LabelPrebound marks the pods a measurement binds before it starts, with
// the run's name: the cluster the scheduled pods land in.
const LabelPrebound = "regosched.io/bench-prebound"

// preboundClusterSize is the largest cluster Prebound makes (a Redis
// cluster of three shards, master and replica each); its members need as
// many distinct nodes.
const preboundClusterSize = 6

// Prebound returns bound pods already placed on nodes: Redis clusters of
// three shards (master and replica each) alternating with Elasticsearch
// clusters of five data pods, in NamespaceNames(run) round robin, until
// there are n pods (the last cluster may be cut short). Pod k goes to
// nodes[k % len(nodes)], so the members of one cluster are on distinct
// nodes and break no rule; the clusters are named apart from Pods' so that
// no scheduled pod is their peer. In native mode they carry the rules as
// required pod anti-affinity, as they would had native scheduling placed
// them: that is what kube-scheduler checks every pending pod against.
func (w Workload) Prebound(mode Mode, run string, n int, nodes []string) ([]*corev1.Pod, error) {
	if n <= 0 {
		return nil, nil
	}
	if len(nodes) < preboundClusterSize {
		return nil, fmt.Errorf("pre-bound pods: need at least %d nodes to keep a cluster's members apart, got %d", preboundClusterSize, len(nodes))
	}
	nss := w.NamespaceNames(run)
	pods := make([]*corev1.Pod, 0, n)
	// add places p on the next node, until there are n pods.
	add := func(p *corev1.Pod) {
		if len(pods) == n {
			return
		}
		p.Labels[LabelPrebound] = run
		p.Spec.SchedulerName = mode.SchedulerName()
		p.Spec.NodeName = nodes[len(pods)%len(nodes)]
		if mode == ModeNative {
			p.Spec.Affinity, p.Spec.TopologySpreadConstraints = NativeRules(p.Labels)
		}
		pods = append(pods, p)
	}
	for c := 0; len(pods) < n; c++ {
		ns := nss[c%len(nss)]
		if c%2 == 0 {
			cluster := fmt.Sprintf("pre-redis-%05d", c/2)
			for sh := range 3 {
				shard := strconv.Itoa(sh)
				add(fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d-master", cluster, sh)).Redis(cluster, "master", shard).Schedulable().Obj())
				add(fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d-replica", cluster, sh)).Redis(cluster, "replica", shard).Schedulable().Obj())
			}
			continue
		}
		cluster := fmt.Sprintf("pre-es-%05d", c/2)
		for d := range 5 {
			add(fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-data-%d", cluster, d)).Elasticsearch(cluster, "data").Schedulable().Obj())
		}
	}
	return pods, nil
}

// Point is one cluster size the benchmark measures: Nodes fake nodes with
// Bound pods already placed on them.
type Point struct {
	Nodes int
	Bound int
}

// DefaultPoints are a small cluster with nothing bound, where the
// extender protocol's own cost shows, and a large busy one, where native
// anti-affinity's cost grows with the pods it must check.
var DefaultPoints = []Point{{Nodes: 1000, Bound: 0}, {Nodes: 5000, Bound: 10000}}

// ParsePoints reads points written NODES:BOUND, comma separated, e.g.
// "1000:0,5000:10000".
func ParsePoints(s string) ([]Point, error) {
	var out []Point
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		nodes, bound, ok := strings.Cut(f, ":")
		if !ok {
			return nil, fmt.Errorf("point %q: want NODES:BOUND", f)
		}
		n, errN := strconv.Atoi(nodes)
		b, errB := strconv.Atoi(bound)
		if errN != nil || errB != nil {
			return nil, fmt.Errorf("point %q: NODES and BOUND must be numbers", f)
		}
		pt := Point{Nodes: n, Bound: b}
		if err := pt.Validate(); err != nil {
			return nil, err
		}
		out = append(out, pt)
	}
	return out, nil
}

// Validate refuses a point with no node, a negative count, or bound pods
// on fewer nodes than a pre-bound cluster needs to keep its members apart.
func (p Point) Validate() error {
	switch {
	case p.Nodes < 1:
		return fmt.Errorf("point %d:%d: nodes must be a positive number", p.Nodes, p.Bound)
	case p.Bound < 0:
		return fmt.Errorf("point %d:%d: bound pods must be a number from 0", p.Nodes, p.Bound)
	case p.Bound > 0 && p.Nodes < preboundClusterSize:
		return fmt.Errorf("point %d:%d: bound pods need at least %d nodes", p.Nodes, p.Bound, preboundClusterSize)
	}
	return nil
}
