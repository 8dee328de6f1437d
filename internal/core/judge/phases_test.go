package judge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/placement/placementtest"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/test/fixture"
)

// fixedPolicy is one active policy for the whole test.
type fixedPolicy struct{ p *policy.Policy }

func (f fixedPolicy) Load() *policy.Policy { return f.p }

// phases is a judge over a real placement cache holding, on four nodes,
// master m1 (node-2) and replica r0 (node-3) of Redis cluster cache.
type phases struct {
	judge *judge.Judge
	cache *placement.Cache
	pol   *policy.Policy
}

func newPhases(t *testing.T) phases {
	t.Helper()
	pol := policytest.Default(t)
	objs := []runtime.Object{
		fixture.MakePod().Namespace("shop").Name("m1").Redis("cache", "master", "1").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("r0").Redis("cache", "replica", "0").Node("node-3").Obj(),
	}
	for _, n := range []string{"node-1", "node-2", "node-3", "node-4"} {
		objs = append(objs, fixture.MakeNode().Name(n).Obj())
	}
	cache := placementtest.Start(t, fake.NewClientset(objs...), policy.Describer(func() *policy.Policy { return pol }))
	log := logrus.New()
	log.SetOutput(io.Discard)
	j, err := judge.New(judge.Config{Placements: cache, Policies: fixedPolicy{pol}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return phases{judge: j, cache: cache, pol: pol}
}

// master0 is the pending master of shard 0, of priority prio.
func master0(prio int32) *corev1.Pod {
	return fixture.MakePod().Namespace("shop").Name("m0").Redis("cache", "master", "0").Priority(prio).Obj()
}

// refusal is a Refusal as the tests compare it.
type refusal struct {
	Index      int
	Node       string
	Reason     string
	Resolvable bool
}

func refusals(rs []judge.Refusal) []refusal {
	out := []refusal{}
	for _, r := range rs {
		out = append(out, refusal{r.Index, r.Node, r.Reason(), r.Resolvable})
	}
	return out
}

// TestFilter: the filter phase refuses the candidates where a hard rule
// would break, resolvable only where every conflicting peer may be
// evicted (lower priority, not protected: a master never is).
func TestFilter(t *testing.T) {
	masters := "redis: master shop/m1 of cluster cache already on this node"
	own := "redis: replica shop/r0 of cluster cache (shard 0) already on this node"
	tests := []struct {
		name       string
		prio       int32
		candidates []string
		want       []refusal
		allRefused bool
	}{
		{"equal priority: nothing to evict", 0, []string{"node-1", "node-2", "node-3", "node-4"},
			[]refusal{{1, "node-2", masters, false}, {2, "node-3", own, false}}, false},
		{"higher priority: the replica may be evicted, the master not", 100, []string{"node-1", "node-2", "node-3", "node-4"},
			[]refusal{{1, "node-2", masters, false}, {2, "node-3", own, true}}, false},
		{"every candidate refused", 0, []string{"node-3", "node-2"},
			[]refusal{{0, "node-3", own, false}, {1, "node-2", masters, false}}, true},
		{"a conflict off the candidates changes nothing", 0, []string{"node-1", "node-4"}, []refusal{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPhases(t)
			f, err := p.judge.Filter(context.Background(), judge.FilterRequest{Policy: p.pol, Pod: master0(tt.prio), Candidates: tt.candidates})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, refusals(f.Refused)); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
			if f.AllRefused() != tt.allRefused {
				t.Errorf("AllRefused() = %v, want %v", f.AllRefused(), tt.allRefused)
			}
		})
	}
}

// TestFilterDoubt: peers in doubt are re-read only when Doubt asks, and
// a pod without a policy is an error, not a pass.
func TestFilterDoubt(t *testing.T) {
	p := newPhases(t)
	asked := 0
	_, err := p.judge.Filter(context.Background(), judge.FilterRequest{
		Policy: p.pol, Pod: master0(0), Candidates: []string{"node-2"},
		Doubt: func(_ context.Context, f *judge.Filtered) func(*model.Pod) bool {
			asked++
			if !f.AllRefused() {
				t.Error("Doubt asked although a candidate was kept")
			}
			return nil
		},
	})
	if err != nil || asked != 1 {
		t.Fatalf("Filter() err = %v, Doubt asked %d times; want nil, 1", err, asked)
	}
	if _, err := p.judge.Filter(context.Background(), judge.FilterRequest{Pod: master0(0)}); !errors.Is(err, policy.ErrNoPolicy) {
		t.Errorf("Filter() without a policy: err = %v, want ErrNoPolicy", err)
	}
}

// TestDecideUnderEdits: node by node, as the plugin asks, a victim taken
// off its node frees it, and a copy of the edits leaves the original.
func TestDecideUnderEdits(t *testing.T) {
	const own = "redis: replica shop/r0 of cluster cache (shard 0) already on this node"
	p := newPhases(t)
	f, err := p.judge.Filter(context.Background(), judge.FilterRequest{Policy: p.pol, Pod: master0(100)})
	if err != nil {
		t.Fatal(err)
	}
	var main judge.Edits
	if !f.Refuses(&main) {
		t.Fatal("Refuses() = false with two conflicting peers")
	}
	r, refused := f.Decide("node-3", &main)
	if !refused || !r.Resolvable || !slices.Equal(r.ReasonLines(), []string{own}) {
		t.Fatalf("Decide(node-3) = %+v, %v; want a resolvable refusal by r0", r, refused)
	}
	dry := main.Clone()
	dry.Remove(f, types.UID("uid-r0"))
	if _, refused := f.Decide("node-3", &dry); refused {
		t.Error("Decide(node-3) with r0 removed still refuses")
	}
	if _, refused := f.Decide("node-3", &main); !refused {
		t.Error("removing r0 from a clone changed the original edits")
	}
	if _, refused := f.Decide("node-1", &main); refused {
		t.Error("Decide(node-1) refuses a node without conflicts")
	}
}

// TestPlace: with recheck, a placing that would break a rule is refused
// with the rule; a good one is recorded, and the next pod judged sees it.
func TestPlace(t *testing.T) {
	p := newPhases(t)
	ctx := context.Background()
	f, err := p.judge.Filter(ctx, judge.FilterRequest{Policy: p.pol, Pod: master0(0), Candidates: []string{"node-1"}})
	if err != nil {
		t.Fatal(err)
	}
	var refused *judge.RefusedError
	if _, err := p.judge.Place(ctx, f.Subject, "node-2", true); !errors.As(err, &refused) || len(refused.Conflicts) != 1 {
		t.Fatalf("Place(node-2) err = %v, want a RefusedError with one conflict", err)
	}
	placed, err := p.judge.Place(ctx, f.Subject, "node-1", true)
	if err != nil || placed.Node != "node-1" {
		t.Fatalf("Place(node-1) = %v, %v; want the pod on node-1", placed, err)
	}
	next := fixture.MakePod().Namespace("shop").Name("m2").Redis("cache", "master", "2").Obj()
	g, err := p.judge.Filter(ctx, judge.FilterRequest{Policy: p.pol, Pod: next, Candidates: []string{"node-1", "node-4"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"node-1"}, nodesOf(g.Refused)); diff != "" {
		t.Errorf("the next master's refusals (-want +got):\n%s", diff)
	}
}

// TestPlaceGuardsZones: with recheck, the rules per zone are guarded as
// the rules per node are: a master bound into its replica's zone by a
// stale filter answer (a burst) is refused while another zone takes it,
// and placed when none does, as filter would yield, with an Event that
// says so on the pod.
func TestPlaceGuardsZones(t *testing.T) {
	const zone = "redis: replica shop/r0 of cluster cache (shard 0) already in zone a"
	tests := []struct {
		name  string
		zones []string // of node-1, node-2, ...: r0 on node-1, master m1 on node-3
		want  string   // the refusal's reason, "" if placed
	}{
		{"node-4 in zone b takes the master", []string{"a", "a", "b", "b"}, zone},
		{"zone b's one node holds a master: the rule yields", []string{"a", "a", "b"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := policytest.Default(t)
			objs := []runtime.Object{
				fixture.MakePod().Namespace("shop").Name("r0").Redis("cache", "replica", "0").Node("node-1").Obj(),
				fixture.MakePod().Namespace("shop").Name("m1").Redis("cache", "master", "1").Node("node-3").Obj(),
			}
			for i, z := range tt.zones {
				objs = append(objs, fixture.MakeNode().Name(fmt.Sprintf("node-%d", i+1)).Zone(z).Obj())
			}
			cache := placementtest.Start(t, fake.NewClientset(objs...), policy.Describer(func() *policy.Policy { return pol }))
			log := logrus.New()
			log.SetOutput(io.Discard)
			recorder := events.NewFakeRecorder(10)
			j, err := judge.New(judge.Config{Placements: cache, Policies: fixedPolicy{pol}, Recorder: recorder, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			// The filter answer is taken as stale: the scheduler chose node-2.
			s, err := j.Describe(context.Background(), pol, master0(0))
			if err != nil {
				t.Fatal(err)
			}
			_, err = j.Place(context.Background(), s, "node-2", true)
			var refused *judge.RefusedError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Place(node-2) err = %v, want the master placed", err)
			case tt.want != "" && !errors.As(err, &refused):
				t.Fatalf("Place(node-2) err = %v, want a RefusedError", err)
			case tt.want != "" && refused.Reason() != tt.want:
				t.Errorf("Place(node-2) refused for %q, want %q", refused.Reason(), tt.want)
			}
			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, <-recorder.Events)
			}
			var want []string
			if tt.want == "" {
				want = []string{"Warning " + judge.ZonesYielded + " no node takes the pod under the rules per zone, so they yield and it is placed breaking one: " + zone}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVictims: a preemption candidate stays where the scheduler's victims
// plus the conflicting peers free the pod without evicting a protected
// pod, and its victims gain those peers.
func TestVictims(t *testing.T) {
	p := newPhases(t)
	_, kept, err := p.judge.Victims(context.Background(), p.pol, master0(100), map[string][]types.UID{
		"node-1": {"uid-x"}, "node-2": nil, "node-3": nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]types.UID{"node-1": {"uid-x"}, "node-3": {"uid-r0"}}
	if diff := cmp.Diff(want, kept); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
}

func nodesOf(rs []judge.Refusal) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Node)
	}
	return out
}

// TestFilterSoftTier: with the soft tier, the candidates no hard rule
// refuses but whose total penalty is above the lowest are refused too,
// in the candidates' order among the hard refusals; Release leaves the
// hard ones alone.
func TestFilterSoftTier(t *testing.T) {
	r1 := fixture.MakePod().Namespace("shop").Name("r1").Redis("cache", "replica", "1").Obj()
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	hard := refusal{1, "node-2", "redis: master shop/m1 of cluster cache (shard 1) already on this node", false}
	// node-3 holds r0, a member of the same cluster: the spread rule's penalty.
	soft := refusal{2, "node-3", "soft rules: penalty 1 here, 0 on the nodes kept", false}
	tests := []struct {
		name        string
		softTier    bool
		want        []refusal
		wantRelease []refusal
	}{
		{"hard rules alone", false, []refusal{hard}, []refusal{hard}},
		{"soft tier", true, []refusal{hard, soft}, []refusal{hard}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPhases(t)
			f, err := p.judge.Filter(context.Background(), judge.FilterRequest{Policy: p.pol, Pod: r1, Candidates: candidates, SoftTier: tt.softTier})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, refusals(slices.Collect(f.Refusals()))); diff != "" {
				t.Errorf("Refusals() (-want +got):\n%s", diff)
			}
			if f.RefusedCount() != len(tt.want) {
				t.Errorf("RefusedCount() = %d, want %d", f.RefusedCount(), len(tt.want))
			}
			if diff := cmp.Diff([]refusal{hard}, refusals(f.Refused)); diff != "" {
				t.Errorf("Refused, the hard rules' (-want +got):\n%s", diff)
			}
			f.Release()
			if diff := cmp.Diff(tt.wantRelease, refusals(slices.Collect(f.Refusals()))); diff != "" {
				t.Errorf("Refusals() after Release (-want +got):\n%s", diff)
			}
		})
	}
}
