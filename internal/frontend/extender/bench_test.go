package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/frontend/decision"
	"github.com/regosched/regosched/test/fixture"
)

// benchPod is a bound Redis pod of cluster c in namespace ns.
func benchPod(ns, c string, i int, node string) *corev1.Pod {
	role := "replica"
	if i%2 == 0 {
		role = "master"
	}
	return fixture.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", c, i)).UID(fmt.Sprintf("%s-%s-%d", ns, c, i)).
		Redis(c, role, fmt.Sprint(i/2)).Node(node).Phase(corev1.PodRunning).Obj()
}

// decoded gives p's strings allocations of their own and a resource
// version, as decoding a list from the API server does, so that what the
// cache keeps of them (namespace, node name) is counted as in production and
// what it drops (label strings) costs nothing.
func decoded(p *corev1.Pod, rv int) *corev1.Pod {
	p.Namespace = strings.Clone(p.Namespace)
	p.Spec.NodeName = strings.Clone(p.Spec.NodeName)
	p.ResourceVersion = strconv.Itoa(1000 + rv)
	labels := make(map[string]string, len(p.Labels))
	for k, v := range p.Labels {
		labels[strings.Clone(k)] = strings.Clone(v)
	}
	p.Labels = labels
	return p
}

// benchHandler serves the real API over a cache of `pods` bound Redis pods
// (clusters of 6) on `nodes` nodes, and returns a filter request body for a
// new master of cluster-0, whose 6 peers are spread over the nodes.
//
// The pods reach the informer through a list reactor that builds them for
// the one list call, as an API server decodes fresh objects: a fake
// clientset's tracker would otherwise keep 100,000 full pods on the
// benchmark's heap, which regosched's process does not hold (its informer
// keeps stripped pods only) and which the garbage collector would scan on
// every cycle.
//
// With seen, the pending master is also in the API, a pod of the regosched
// profile, as kube-scheduler's queued pods are: regosched describes it
// ahead of the requests, as it does in production. Without, every request
// describes it (a pod the scheduler reaches before regosched heard of it).
func benchHandler(b testing.TB, nodes, pods int, seen bool) (http.Handler, []byte) {
	b.Helper()
	return benchHandlerFor(b, pendingMaster(b), nodes, pods, seen, decision.Options{})
}

// benchHandlerFor is benchHandler with pending as the pod to place.
func benchHandlerFor(b testing.TB, pending *corev1.Pod, nodes, pods int, seen bool, dopts decision.Options) (http.Handler, []byte) {
	b.Helper()
	objs := make([]runtime.Object, 0, nodes)
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
		objs = append(objs, fixture.MakeNode().Name(names[i]).Zone(fmt.Sprintf("zone-%d", i%3)).Obj())
	}
	client := fake.NewClientset(objs...)
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if sel := a.(k8stesting.ListAction).GetListRestrictions().Fields; sel.Matches(fields.Set{"spec.nodeName": "", "spec.schedulerName": "regosched"}) {
			list := &corev1.PodList{}
			if seen {
				list.Items = append(list.Items, *pending.DeepCopy())
			}
			return true, list, nil
		}
		list := &corev1.PodList{Items: make([]corev1.Pod, 0, pods)}
		for i := range pods {
			list.Items = append(list.Items, *decoded(benchPod("ns", fmt.Sprintf("cluster-%d", i/6), i%6, names[(i*7919)%nodes]), i))
		}
		return true, list, nil
	})
	pol, err := bundles.Options{}.LoadFS(context.Background(), regosched.DefaultPolicy(), "default")
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	active, err := bundles.NewActive(reg)
	if err != nil {
		b.Fatal(err)
	}
	active.Store(pol)
	// Logged as serve logs by default (text, info level), to nowhere: the
	// formatting of each denial is paid as in production, while a test hook
	// would keep every entry and grow the heap the collector walks.
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	cache, err := placement.New(client, policy.Describer(active.Load), log)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(func() { cancel(); cache.Shutdown() })
	cache.Start(ctx)
	if !cache.WaitForSync(ctx) {
		b.Fatal("cache did not sync")
	}
	views, err := placement.NewPending(client, "regosched", policy.PendingDescriber(active.Load, nil), log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); views.Shutdown() })
	views.Start(ctx)
	if !views.WaitForSync(ctx) {
		b.Fatal("pending pods not synced")
	}
	dopts.Pending = views
	d, err := decision.New(cache, active, log, reg, dopts)
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{URLPrefix: "/scheduler", Decider: d, Ready: func() error { return nil },
		Version: func() any { return nil }, Registerer: reg, Gatherer: reg, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: pending, NodeNames: &names})
	if err != nil {
		b.Fatal(err)
	}
	return h, body
}

// pendingMaster is a new master of cluster-0 as kube-scheduler sends it: a
// whole StatefulSet pod as the API server stores it (managed fields,
// defaults, status), from testdata, not a pod of labels alone, so that the
// benchmarks decode what a real request carries.
func pendingMaster(b testing.TB) *corev1.Pod { return pendingMember(b, 6, "new-master") }

// pendingMember is member i of cluster-0 (benchPod's roles and shards),
// named name, as pendingMaster makes it.
func pendingMember(b testing.TB, i int, name string) *corev1.Pod {
	b.Helper()
	raw, err := os.ReadFile("../../../testdata/pod-redis-statefulset.json")
	if err != nil {
		b.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		b.Fatal(err)
	}
	template := benchPod("ns", "cluster-0", i, "")
	pod.Namespace, pod.Name, pod.UID = "ns", "cluster-0-"+name, types.UID(name)
	pod.Spec.SchedulerName, pod.Spec.NodeName = "regosched", ""
	maps.Copy(pod.Labels, template.Labels)
	return &pod
}

func benchmarkVerb(b *testing.B, verb string, seen bool, dopts decision.Options) {
	benchmarkVerbFor(b, pendingMaster, verb, seen, dopts)
}

// benchmarkVerbFor is benchmarkVerb for the pod pending makes.
func benchmarkVerbFor(b *testing.B, pending func(testing.TB) *corev1.Pod, verb string, seen bool, dopts decision.Options) {
	for _, size := range []struct{ nodes, pods int }{{100, 1000}, {5000, 1000}, {5000, 100000}} {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", size.nodes, size.pods), func(b *testing.B) {
			h, body := benchHandlerFor(b, pending(b), size.nodes, size.pods, seen, dopts)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var answer bytes.Buffer
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/scheduler/"+verb, bytes.NewReader(body))
				rec := httptest.NewRecorder()
				answer.Reset()
				rec.Body = &answer
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkFilter measures the whole filter handler: decode, peer look-up,
// the pending pod's description (made ahead, when the pod was created),
// Rego over its peers' claims, encode.
func BenchmarkFilter(b *testing.B) { benchmarkVerb(b, "filter", true, decision.Options{}) }

// BenchmarkFilterZone is BenchmarkFilter for a new replica of shard 0,
// whose master's zone (a third of the nodes) the rules per zone refuse:
// the filter's cost with a zone refused, logged once per zone. (The new
// master of BenchmarkFilter is refused every zone by its cluster's quorum,
// which then yields.)
func BenchmarkFilterZone(b *testing.B) {
	replica := func(b testing.TB) *corev1.Pod { return pendingMember(b, 1, "new-replica") }
	benchmarkVerbFor(b, replica, "filter", true, decision.Options{})
}

// BenchmarkFilterSoft is BenchmarkFilter with the soft rules folded into
// filter (--soft-rules=filter, as deployed): the candidates' penalties are
// summed there, and no prioritize call follows.
func BenchmarkFilterSoft(b *testing.B) {
	benchmarkVerb(b, "filter", true, decision.Options{SoftInFilter: true})
}

// BenchmarkPrioritize measures the whole prioritize handler, without the
// penalties a filter call just before would have left.
func BenchmarkPrioritize(b *testing.B) { benchmarkVerb(b, "prioritize", true, decision.Options{}) }

// BenchmarkFilterUnseen is BenchmarkFilter for a pod regosched has not
// heard of before the request: the request evaluates its description.
func BenchmarkFilterUnseen(b *testing.B) { benchmarkVerb(b, "filter", false, decision.Options{}) }

// BenchmarkPrioritizeUnseen is BenchmarkPrioritize for a pod regosched has
// not heard of before the request.
func BenchmarkPrioritizeUnseen(b *testing.B) {
	benchmarkVerb(b, "prioritize", false, decision.Options{})
}

// BenchmarkDecodeArgs reads and decodes the very body of
// BenchmarkFilter/nodes=5000 as the handler does: the floor of any handler
// that reads its request.
func BenchmarkDecodeArgs(b *testing.B) {
	_, body := benchHandler(b, 5000, 0, true)
	b.Run("nodes=5000", func(b *testing.B) {
		var (
			bodies bodyBuffers
			args   argsDecoder
		)
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			a, err := decode(&bodies, bytes.NewReader(body), int64(len(body)), DefaultMaxBodyBytes, args.decode)
			if err != nil {
				b.Fatal(err)
			}
			args.release(a) // as the handler does once it has answered
		}
	})
}

// TestBenchHandlerCachesPods: the list reactor of benchHandler does reach
// the cache, so the benchmarks run over the peers they claim to.
func TestBenchHandlerCachesPods(t *testing.T) {
	h, body := benchHandler(t, 100, 1000, true)
	req := httptest.NewRequest(http.MethodPost, "/scheduler/filter", bytes.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var res extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("filter: status %d, %v: %s", rec.Code, err, rec.Body)
	}
	// cluster-0's three masters (pods 0, 2, 4) are bound: the new master may join none of their nodes.
	if len(res.FailedAndUnresolvableNodes) != 3 || res.NodeNames == nil || len(*res.NodeNames) != 97 {
		t.Errorf("filter answer = %d unresolvable, NodeNames %v; want 3 and 97 nodes", len(res.FailedAndUnresolvableNodes), res.NodeNames)
	}
	// And the pending master, in the API as a queued pod is, was described ahead.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := `regosched_pending_descriptions_total{when="ahead"} 1`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %s:\n%s", want, rec.Body)
	}
}

// BenchmarkCacheHeap reports the heap regosched keeps per cached pod with
// the default policy (the informer's stripped records, the peer index and
// every pod's marks), from 100,000 bound Redis pods in clusters of six,
// each cluster with marks of its own: the difference between the handler
// over them and over none (the fake API server keeps no pod, see
// benchHandler).
func BenchmarkCacheHeap(b *testing.B) {
	const pods = 100000
	heap := func() (bytes, objects float64) {
		var m goruntime.MemStats
		goruntime.GC()
		goruntime.GC() // and what sync.Pools keep one cycle more
		goruntime.ReadMemStats(&m)
		return float64(m.HeapAlloc), float64(m.HeapObjects)
	}
	for b.Loop() {
		b0, o0 := heap()
		empty, _ := benchHandler(b, 5000, 0, false)
		b1, o1 := heap()
		full, _ := benchHandler(b, 5000, pods, false)
		b2, o2 := heap()
		goruntime.KeepAlive(empty)
		goruntime.KeepAlive(full)
		b.ReportMetric(((b2-b1)-(b1-b0))/pods, "bytes/pod")
		b.ReportMetric(((o2-o1)-(o1-o0))/pods, "objects/pod")
	}
}
