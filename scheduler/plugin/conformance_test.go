package plugin

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/judge/judgetest"
)

// TestConformance runs the front ends' conformance table through the
// plugin's PreFilter, Filter, PreScore, Score and NormalizeScore;
// internal/frontend/decision runs the same table through the extender's verbs.
func TestConformance(t *testing.T) {
	for _, tc := range judgetest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			pl, nodes := conformancePlugin(t, tc, recorder)
			ctx := context.Background()
			cs := framework.NewCycleState()
			_, pre := pl.PreFilter(ctx, cs, tc.Pending, nodes)
			if !pre.IsSuccess() && pre.Code() != fwk.Skip {
				t.Fatalf("PreFilter = %v", pre)
			}
			got := map[string]judgetest.Outcome{}
			var passing []fwk.NodeInfo
			for _, ni := range nodes {
				st := fwk.NewStatus(fwk.Success)
				if pre.Code() != fwk.Skip { // the framework calls no Filter of a plugin that skipped
					st = pl.Filter(ctx, cs, tc.Pending, ni)
				}
				switch st.Code() {
				case fwk.Success:
					got[ni.Node().Name] = judgetest.Pass
					passing = append(passing, ni)
				case fwk.Unschedulable:
					got[ni.Node().Name] = judgetest.Preemptible
				case fwk.UnschedulableAndUnresolvable:
					got[ni.Node().Name] = judgetest.Unresolvable
				default:
					t.Fatalf("Filter on %s = %v", ni.Node().Name, st)
				}
			}
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(judgetest.WantEvents(tc), judgetest.GotEvents(recorder)); diff != "" {
				t.Errorf("filter's Events (-want +got):\n%s", diff)
			}
			var names []string
			for _, ni := range passing {
				names = append(names, ni.Node().Name)
			}
			if diff := cmp.Diff(judgetest.WantScores(tc, names, fwk.MaxScore), scores(t, pl, cs, tc.Pending, passing)); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

// scores runs PreScore, Score and NormalizeScore as the framework does,
// without the nodes that score 0 and with none when PreScore skips (no
// preference), as the extender answers.
func scores(t *testing.T, pl *Regosched, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	got := map[string]int64{}
	if len(nodes) == 0 {
		return got // the framework scores no node when none passes
	}
	st := pl.PreScore(ctx, cs, pod, nodes)
	if st.Code() == fwk.Skip {
		return got
	}
	if !st.IsSuccess() {
		t.Fatalf("PreScore = %v", st)
	}
	var list fwk.NodeScoreList
	for _, ni := range nodes {
		s, st := pl.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score = %v", st)
		}
		list = append(list, fwk.NodeScore{Name: ni.Node().Name, Score: s})
	}
	if st := pl.NormalizeScore(ctx, cs, pod, list); !st.IsSuccess() {
		t.Fatalf("NormalizeScore = %v", st)
	}
	if allEqual(list) && list[0].Score == fwk.MaxScore {
		// Every node at the maximum: no preference, as the extender says by
		// giving no scores.
		return got
	}
	for _, s := range list {
		if s.Score > 0 {
			got[s.Name] = s.Score
		}
	}
	return got
}

func allEqual(list fwk.NodeScoreList) bool {
	for _, s := range list {
		if s.Score != list[0].Score {
			return false
		}
	}
	return true
}

// conformancePlugin is the plugin whose placement cache lists tc's nodes
// and bound pods, and whose scheduler snapshot and API reads see tc.Now:
// the cache behind the scheduler's informer and the API server.
func conformancePlugin(t *testing.T, tc judgetest.Case, recorder events.EventRecorder) (*Regosched, []fwk.NodeInfo) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	objs := tc.Objects()
	var now []*corev1.Pod // the snapshot's bound pods
	for _, p := range tc.Bound {
		q, changed := tc.Now[p.Name]
		switch {
		case !changed:
			now = append(now, p)
		case q != nil && q.Spec.NodeName != "":
			now = append(now, q)
		}
	}
	objs = append(objs, tc.Pending)
	client := fake.NewClientset(objs...)
	client.PrependReactor("get", "pods", tc.APIReads)
	snapshot := schedcache.NewSnapshot(now, tc.Nodes)
	log := logrus.New()
	log.SetOutput(io.Discard)
	pl, err := New(ctx, Config{
		Bundles: bundles.Config{Default: regosched.DefaultPolicy(), Log: log}, Client: client, Snapshot: snapshot,
		Recorder: recorder, SyncTimeout: 10 * time.Second, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []fwk.NodeInfo
	for _, n := range tc.Nodes {
		ni, err := snapshot.NodeInfos().Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, ni)
	}
	return pl, nodes
}

// TestConformancePreemption runs the front ends' preemption table through
// the plugin's PostFilter, after PreFilter and Filter as the framework runs
// them; internal/frontend/decision runs it through the preempt verb.
func TestConformancePreemption(t *testing.T) {
	for _, tc := range judgetest.PreemptionCases() {
		t.Run(tc.Name, func(t *testing.T) {
			got := newPreemptionHarness(t, nil, tc.Nodes, tc.Bound, tc.Pending).preempt(t, tc.Pending)
			for _, v := range got.victims {
				if slices.Contains(tc.Spared, v) {
					t.Errorf("%s evicted; the policy protects it", v)
				}
			}
			if diff := cmp.Diff(tc.Victims, got.victims, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
		})
	}
}
