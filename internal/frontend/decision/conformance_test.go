package decision

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge/judgetest"
	"github.com/regosched/regosched/internal/core/placement/placementtest"
	"github.com/regosched/regosched/internal/core/policy"
)

// TestConformance runs the front ends' conformance table through the
// extender's filter and prioritize verbs; scheduler/plugin runs the same
// table through the framework plugin.
func TestConformance(t *testing.T) {
	pol := defaultPolicy(t)
	for _, tc := range judgetest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			d := conformanceDecider(t, pol, tc, recorder)
			var names []string
			for _, n := range tc.Nodes {
				names = append(names, n.Name)
			}
			pending := tc.Pending.DeepCopy()
			pending.Spec.SchedulerName = testScheduler
			res, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{Pod: pending, NodeNames: &names})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]judgetest.Outcome{}
			for _, n := range *res.NodeNames {
				got[n] = judgetest.Pass
			}
			for n := range res.FailedNodes {
				got[n] = judgetest.Preemptible
			}
			for n := range res.FailedAndUnresolvableNodes {
				got[n] = judgetest.Unresolvable
			}
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(judgetest.WantEvents(tc), judgetest.GotEvents(recorder)); diff != "" {
				t.Errorf("filter's Events (-want +got):\n%s", diff)
			}
			passing := slices.Clone(*res.NodeNames)
			scores, err := d.PrioritizeList(context.Background(), &extenderv1.ExtenderArgs{Pod: pending, NodeNames: &passing})
			if err != nil {
				t.Fatal(err)
			}
			gotScores := map[string]int64{}
			for _, s := range scores {
				gotScores[s.Host] = s.Score
			}
			if diff := cmp.Diff(judgetest.WantScores(tc, passing, extenderv1.MaxExtenderPriority), gotScores); diff != "" {
				t.Errorf("prioritize (-want +got):\n%s", diff)
			}
		})
	}
}

// conformanceDecider is a Decider whose placement cache lists tc's nodes
// and bound pods, and whose API reads see tc.Now: the cache behind the API
// server.
func conformanceDecider(t *testing.T, pol *policy.Policy, tc judgetest.Case, recorder events.EventRecorder) *Decider {
	t.Helper()
	objs := tc.Objects()
	for i, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p = p.DeepCopy()
			p.Spec.SchedulerName = testScheduler
			objs[i] = p
		}
	}
	pending := tc.Pending.DeepCopy()
	pending.Spec.SchedulerName = testScheduler
	objs = append(objs, pending)
	client := fake.NewClientset(objs...)
	client.PrependReactor("get", "pods", tc.APIReads)
	log, _ := logtest.NewNullLogger()
	cache := placementtest.Start(t, client, policy.Describer(func() *policy.Policy { return pol }))
	d, err := New(cache, staticPolicies{pol}, log, prometheus.NewRegistry(), Options{Client: client, SchedulerName: testScheduler, Recorder: recorder})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestConformancePreemption runs the front ends' preemption table through
// the extender's preempt verb, handed the victims kube-scheduler's own dry
// run picks; scheduler/plugin runs it through the plugin's PostFilter.
func TestConformancePreemption(t *testing.T) {
	pol := defaultPolicy(t)
	for _, tc := range judgetest.PreemptionCases() {
		t.Run(tc.Name, func(t *testing.T) {
			d := conformanceDecider(t, pol, judgetest.Case{Nodes: tc.Nodes, Bound: tc.Bound, Pending: tc.Pending}, events.NewFakeRecorder(10))
			pending := tc.Pending.DeepCopy()
			pending.Spec.SchedulerName = testScheduler
			uids := map[string]string{} // pod name by UID
			for _, p := range tc.Bound {
				uids[string(p.UID)] = p.Name
			}
			args := &extenderv1.ExtenderPreemptionArgs{Pod: pending, NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
			for node, names := range tc.Candidates {
				mv := &extenderv1.MetaVictims{}
				for _, p := range tc.Bound {
					if slices.Contains(names, p.Name) {
						mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: string(p.UID)})
					}
				}
				args.NodeNameToMetaVictims[node] = mv
			}
			res, err := d.Preempt(context.Background(), args)
			if err != nil {
				t.Fatal(err)
			}
			for node, mv := range res.NodeNameToMetaVictims {
				for _, p := range mv.Pods {
					if name := uids[p.UID]; slices.Contains(tc.Spared, name) {
						t.Errorf("%s kept as a victim on %s; the policy protects it", name, node)
					}
				}
			}
		})
	}
}
