package plugin

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/internal/ops/shadow"
	"github.com/regosched/regosched/test/fixture"
)

// offers records the shadow requests offered.
type offers struct {
	mu sync.Mutex
	r  []*shadow.Request
}

func (o *offers) Offer(r *shadow.Request) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.r = append(o.r, r)
	return true
}

// TestShadowOffersTheCandidates: the plugin offers the shadow one request
// per cycle, once the filtering is over, with the nodes Filter was called
// for (those every other filter let through, as the extender's candidates
// are), the nodes the active policy denied with its reasons, and its
// penalties; a preemption dry run's clone adds no candidate.
func TestShadowOffersTheCandidates(t *testing.T) {
	replica := fixture.MakePod().Namespace(ns).Name("cache-1-replica").Redis("cache", "replica", "1").Obj()
	tests := []struct {
		name     string
		pod      *corev1.Pod
		filterOn []string // the nodes Filter is called for, in parallel
		dryRun   []string // Filter on a clone of the state, as preemption calls it
		then     []string // the extension points after Filter, in order
		want     []string // per request: candidates, then "denied:" and its nodes
	}{
		{
			name: "two nodes fit: offered at PreScore, once", pod: replica,
			filterOn: []string{"n1", "n2", "n3"}, then: []string{"PreScore", "Reserve"},
			want: []string{"n1 n2 n3 denied: n2"},
		},
		{
			name: "one node fits: offered at Reserve", pod: replica,
			filterOn: []string{"n2", "n3"}, then: []string{"Reserve"},
			want: []string{"n2 n3 denied: n2"},
		},
		{
			name: "no node fits: offered at PostFilter", pod: fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Obj(),
			filterOn: []string{"n1", "n2"}, then: []string{"PostFilter"},
			want: []string{"n1 n2 denied: n1 n2"},
		},
		{
			name: "a dry run's Filter calls are no candidates", pod: replica,
			filterOn: []string{"n2"}, dryRun: []string{"n1", "n3"}, then: []string{"PostFilter", "Reserve"},
			want: []string{"n2 denied: n2"},
		},
		{
			name: "no node reached Filter: nothing to compare", pod: replica,
			then: []string{"PostFilter"},
		},
		{
			name: "a pod without peers is not offered", pod: fixture.MakePod().Namespace(ns).Name("web").Schedulable().Obj(),
			filterOn: []string{"n1"}, then: []string{"PreScore", "Reserve", "PostFilter"},
		},
	}
	for _, tt := range tests {
		// PreFilter is given every node by the framework (a slot each for
		// Filter's notes), or none, as in the other tests here.
		for _, given := range []string{"every node", "no node"} {
			t.Run(tt.name+"/PreFilter given "+given, func(t *testing.T) {
				f := newHarness(t)
				o := &offers{}
				f.pl.shadow = o
				ctx := context.Background()
				var all []fwk.NodeInfo
				if given == "every node" {
					for _, n := range slices.Sorted(maps.Keys(f.nodes)) {
						all = append(all, f.nodes[n])
					}
				}
				cs := framework.NewCycleState()
				f.pl.PreFilter(ctx, cs, tt.pod, all)
				var wg sync.WaitGroup
				for _, n := range tt.filterOn {
					wg.Go(func() { f.pl.Filter(ctx, cs, tt.pod, f.nodes[n]) })
				}
				wg.Wait()
				clone := cs.Clone()
				for _, n := range tt.dryRun {
					f.pl.Filter(ctx, clone, tt.pod, f.nodes[n])
				}
				for _, point := range tt.then {
					switch point {
					case "PreScore":
						f.pl.PreScore(ctx, cs, tt.pod, nil)
					case "Reserve":
						f.pl.Reserve(ctx, cs, tt.pod, tt.filterOn[len(tt.filterOn)-1])
					case "PostFilter":
						if _, st := f.pl.PostFilter(ctx, cs, tt.pod, nil); st.Code() != fwk.Unschedulable {
							t.Errorf("PostFilter = %v, want Unschedulable", st)
						}
					}
				}
				var got []string
				for _, r := range o.r {
					nodes := slices.Sorted(slices.Values(r.Nodes))
					line := ""
					for _, n := range nodes {
						line += n + " "
					}
					line += "denied:"
					for _, n := range slices.Sorted(maps.Keys(r.Denied)) {
						line += " " + n
					}
					if r.Verb != "filter" || r.Pod.Name != tt.pod.Name || len(r.Peers) == 0 {
						t.Errorf("request verb %q pod %q peers %d", r.Verb, r.Pod.Name, len(r.Peers))
					}
					got = append(got, line)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("requests offered (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestShadowPolicy: with shadowPolicy, a bundle that denies more is judged
// beside the active one and counted on the plugin's registry, and the
// plugin's answers are those of a plugin without it.
func TestShadowPolicy(t *testing.T) {
	dir := policytest.WriteDir(t, policytest.VariantFS(t, policytest.KeepClusterApart), t.TempDir())
	tests := []struct {
		name string
		pod  *corev1.Pod
		// want is the filter disagreements: nodes the active policy allows
		// and the shadow denies, among n1..n3.
		want float64
	}{
		{name: "another shard's replica: the shadow also denies cache-0-master's node", pod: fixture.MakePod().Namespace(ns).Name("cache-1-replica").Redis("cache", "replica", "1").Obj(), want: 1},
		{name: "a master: both deny both masters' nodes", pod: fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Obj(), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain, shadowed := newHarness(t), newHarnessWith(t, options{shadowPolicy: dir})
			answers := func(f *harness) map[string]string {
				cs, st := f.preFilter(t, tt.pod)
				if !st.IsSuccess() {
					t.Fatalf("PreFilter = %v", st)
				}
				got := f.filter(t, cs, tt.pod)
				f.pl.PreScore(context.Background(), cs, tt.pod, nil)
				return got
			}
			want := answers(plain)
			if diff := cmp.Diff(want, answers(shadowed)); diff != "" {
				t.Errorf("Filter with a shadow policy (-want +got):\n%s", diff)
			}
			// A marker offered after the pod's request: once it is counted,
			// so is the pod's (one worker judges the queue in order).
			marker := fixture.MakePod().Namespace(ns).Name("cache-1-replica").Redis("cache", "replica", "1").Obj()
			cs, _ := shadowed.preFilter(t, marker)
			shadowed.filter(t, cs, marker)
			shadowed.pl.PreScore(context.Background(), cs, marker, nil)
			var got float64
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if got = counter(t, shadowed.reg, "regosched_shadow_disagreements_total", "filter"); got >= tt.want+1 {
					break
				}
			}
			if diff := cmp.Diff(tt.want, got-1); diff != "" {
				t.Errorf("filter disagreements, the marker's one aside (-want +got):\n%s", diff)
			}
		})
	}
}

// counter reads name{verb} from reg; 0 when absent.
func counter(t *testing.T, reg prometheus.Gatherer, name, verb string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "verb" && l.GetValue() == verb {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
