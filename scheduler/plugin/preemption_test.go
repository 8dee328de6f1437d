package plugin

import (
	"context"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	kpreemption "k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/judge/judgetest"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/fixture"
)

// The preemption dry run: RemovePod and AddPod on a clone of the state
// change what Filter says there and nowhere else.
func TestPreemptionDryRun(t *testing.T) {
	f := newHarnessWith(t, options{unprotected: true})
	pod := fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(500).Obj()
	cs, _ := f.preFilter(t, pod)
	ctx := context.Background()
	victim := fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1").Obj()
	nominated := fixture.MakePod().Namespace(ns).Name("cache-3-master").Redis("cache", "master", "3").Priority(800).Obj()
	unrelated := fixture.MakePod().Namespace(ns).Name("web").Schedulable().Node("n1").Obj()

	steps := []struct {
		name string
		do   func(clone fwk.CycleState) *fwk.Status
		want map[string]string
	}{
		{
			name: "the lower-priority peer removed",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.RemovePod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
			},
			want: map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
		{
			name: "and an unrelated pod added back",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, unrelated), f.nodes["n1"])
			},
			want: map[string]string{"n1": ok, "n2": unresolvable, "n3": ok},
		},
		{
			name: "and the peer reprieved",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok},
		},
		{
			name: "a nominated master put on n3",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.AddPod(ctx, clone, pod, podInfo(t, nominated), f.nodes["n3"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": unresolvable},
		},
		{
			name: "and taken off again",
			do: func(clone fwk.CycleState) *fwk.Status {
				return f.pl.RemovePod(ctx, clone, pod, podInfo(t, nominated), f.nodes["n3"])
			},
			want: map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok},
		},
	}
	clone := cs.Clone()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if st := s.do(clone); !st.IsSuccess() {
				t.Fatalf("extension = %v", st)
			}
			if diff := cmp.Diff(s.want, f.filter(t, clone, pod)); diff != "" {
				t.Errorf("Filter on the clone (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the original state is untouched", func(t *testing.T) {
		clone := cs.Clone()
		_ = f.pl.RemovePod(ctx, clone, pod, podInfo(t, victim), f.nodes["n1"])
		want := map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok}
		if diff := cmp.Diff(want, f.filter(t, cs, pod)); diff != "" {
			t.Errorf("Filter on the original (-want +got):\n%s", diff)
		}
	})
}

// Default preemption, as the plugin's PostFilter runs it, evicts no pod the
// policy protects (a Redis master), and says so when only such pods could
// make room. n1 has 2 CPUs, full; the pending pod asks for 1 CPU at
// priority 1000. Without the protection, default preemption would evict
// the master wherever evicting it helps (it reprieves the pods of higher
// priority first).
func TestPreemptionNeverEvictsAProtectedPod(t *testing.T) {
	// Builders, new for each pod: a wrapper keeps what was added to it.
	master := func() *fixture.PodWrapper {
		return fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1")
	}
	replica := func() *fixture.PodWrapper {
		return fixture.MakePod().Namespace(ns).Name("cache-1-replica").Redis("cache", "replica", "1").Priority(100).Node("n1")
	}
	web := func(priority int32) *fixture.PodWrapper {
		return fixture.MakePod().Namespace(ns).Name("web").Label("app", "web").Priority(priority).Node("n1")
	}
	pending := judgetest.WithCPU(fixture.MakePod().Namespace(ns).Name("batch").Label("app", "batch").Priority(1000), "1")
	const protects = "regosched protects the pods preemption would have to evict (shop/cache-0-master on node n1) and never evicts a protected pod"

	tests := []struct {
		name   string
		policy func(t *testing.T) fs.FS // the default when nil
		bound  []*corev1.Pod
		want   preempted
		// reason is in the message, or absent from it when empty.
		reason string
	}{
		{
			name:  "an unprotected pod makes room, the master stays",
			bound: []*corev1.Pod{judgetest.WithCPU(master(), "1"), judgetest.WithCPU(web(500), "1")},
			want:  preempted{nominated: "n1", code: fwk.Success, victims: []string{"web"}},
		},
		{
			name:  "a replica is no protected pod",
			bound: []*corev1.Pod{judgetest.WithCPU(replica(), "1"), judgetest.WithCPU(web(1000), "1")},
			want:  preempted{nominated: "n1", code: fwk.Success, victims: []string{"cache-1-replica"}},
		},
		{
			name:   "only the master could make room: pending, and told why",
			bound:  []*corev1.Pod{judgetest.WithCPU(master(), "1"), judgetest.WithCPU(web(1000), "1")},
			want:   preempted{code: fwk.Unschedulable},
			reason: protects,
		},
		{
			name:   "the master and another lower-priority pod together: pending",
			bound:  []*corev1.Pod{judgetest.WithCPU(master(), "1500m"), judgetest.WithCPU(web(500), "500m")},
			want:   preempted{code: fwk.Unschedulable},
			reason: "regosched protects the pods preemption would have to evict (shop/cache-0-master on node n1)",
		},
		{
			name:  "evicting the master would not help either: no word of protection",
			bound: []*corev1.Pod{judgetest.WithCPU(master(), "500m"), judgetest.WithCPU(web(1000), "1500m")},
			want:  preempted{code: fwk.Unschedulable},
		},
		{
			name:   "a pod the policy cannot judge counts as protected",
			policy: func(t *testing.T) fs.FS { return undecidedPolicy(t) },
			bound: []*corev1.Pod{
				judgetest.WithCPU(fixture.MakePod().Namespace(ns).Name("odd").Label("undecided", "yes").Priority(100).Node("n1"), "1"),
				judgetest.WithCPU(web(1000), "1"),
			},
			want:   preempted{code: fwk.Unschedulable},
			reason: "regosched protects the pods preemption would have to evict (shop/odd on node n1)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bundle fs.FS
			if tt.policy != nil {
				bundle = tt.policy(t)
			}
			h := newPreemptionHarness(t, bundle, []*corev1.Node{judgetest.CPUNode("n1", "2")}, tt.bound, pending)
			got := h.preempt(t, pending)
			msg := got.message
			got.message = ""
			t.Logf("message: %s", msg)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(preempted{})); diff != "" {
				t.Errorf("preemption (-want +got):\n%s\nmessage: %s", diff, msg)
			}
			if has := strings.Contains(msg, "regosched protects"); has != (tt.reason != "") || !strings.Contains(msg, tt.reason) {
				t.Errorf("message %q, want it to say %q", msg, tt.reason)
			}
		})
	}
}

// IsEligiblePod keeps the default's own check and refuses any victim with
// a pod the policy protects, or cannot say it does not.
func TestEligibleVictims(t *testing.T) {
	master := fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1").Obj()
	replica := fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Priority(100).Node("n1").Obj()
	odd := fixture.MakePod().Namespace(ns).Name("odd").Label("undecided", "yes").Priority(100).Node("n1").Obj()
	preemptor := fixture.MakePod().Namespace(ns).Name("batch").Priority(1000).Obj()
	ni := framework.NewNodeInfo()
	ni.SetNode(fixture.MakeNode().Name("n1").Obj())
	undecided, err := bundles.Options{}.LoadFS(context.Background(), undecidedPolicy(t), "undecided")
	if err != nil {
		t.Fatal(err)
	}
	defaultPolicy := policytest.Default(t)

	tests := []struct {
		name        string
		pol         *policy.Policy
		victim      []*corev1.Pod
		dfltRefuses bool // the default's own check says no
		want        bool
		wantRefused map[string][]string // protected pods turned down, by node
	}{
		{name: "a replica", pol: defaultPolicy, victim: []*corev1.Pod{replica}, want: true},
		{name: "a master", pol: defaultPolicy, victim: []*corev1.Pod{master}, wantRefused: map[string][]string{"n1": {"cache-0-master"}}},
		{name: "a replica the default refuses", pol: defaultPolicy, victim: []*corev1.Pod{replica}, dfltRefuses: true},
		{name: "a group with a master", pol: defaultPolicy, victim: []*corev1.Pod{replica, master}, wantRefused: map[string][]string{"n1": {"cache-0-master"}}},
		{name: "a pod the policy cannot judge", pol: undecided, victim: []*corev1.Pod{odd}, wantRefused: map[string][]string{"n1": {"odd"}}},
		{name: "no active policy", victim: []*corev1.Pod{replica}, wantRefused: map[string][]string{"n1": {"cache-0-replica"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := logrus.New()
			log.SetOutput(io.Discard)
			p := &preemption{policies: fixedPolicy{tt.pol}, log: log}
			c := newProtection(context.Background(), tt.pol, log)
			p.cycles.Store(preemptor.UID, c)
			dflt := func(fwk.NodeInfo, kpreemption.Victim, *corev1.Pod) bool { return !tt.dfltRefuses }
			var pods []fwk.PodInfo
			for _, v := range tt.victim {
				pods = append(pods, podInfo(t, v))
			}
			if got := p.eligible(dflt)(ni, groupVictim(pods), preemptor); got != tt.want {
				t.Errorf("eligible = %v, want %v", got, tt.want)
			}
			refused := map[string][]string{}
			for node, pods := range c.refused {
				for _, p := range pods {
					refused[node] = append(refused[node], p.Name)
				}
			}
			if diff := cmp.Diff(tt.wantRefused, refused, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
		})
	}
}

// fixedPolicy is Policies with one policy, or none.
type fixedPolicy struct{ p *policy.Policy }

func (f fixedPolicy) Load() *policy.Policy { return f.p }

// groupVictim is a victim of several pods, as a PodGroup is.
type groupVictim []fwk.PodInfo

func (g groupVictim) Priority() int32                 { return 100 }
func (g groupVictim) Pods() []fwk.PodInfo             { return g }
func (g groupVictim) EarliestStartTime() *metav1.Time { return nil }
func (g groupVictim) IsGroup() bool                   { return len(g) > 1 }
func (g groupVictim) Type() fwk.EntityKeyType         { return fwk.PodKeyType }
