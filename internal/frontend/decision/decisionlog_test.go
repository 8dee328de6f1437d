package decision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/test/fixture"
)

// recordLog keeps every event it is given.
type recordLog struct {
	mu     sync.Mutex
	events []decisionlog.Event
}

func (r *recordLog) Enqueue(e decisionlog.Event) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return true
}

// only returns the one event recorded, with what varies from run to run
// (duration) checked and cleared, and its lists sorted.
func (r *recordLog) only(t *testing.T) decisionlog.Event {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) != 1 {
		t.Fatalf("got %d events, want 1: %+v", len(r.events), r.events)
	}
	e := r.events[0]
	if e.Duration <= 0 {
		t.Errorf("event duration %v, want > 0", e.Duration)
	}
	e.Duration = 0
	slices.SortFunc(e.Denied, func(a, b decisionlog.Denial) int {
		return strings.Compare(a.Node+a.Rule+a.Peer, b.Node+b.Rule+b.Peer)
	})
	slices.SortFunc(e.Victims, func(a, b decisionlog.Victim) int { return strings.Compare(a.Node, b.Node) })
	return e
}

// bundlesOf is the bundles of d's events: its policy's revision.
func bundlesOf(d *Decider) map[string]string {
	return map[string]string{"regosched": d.policies.Load().Revision()}
}

// logPod is the event's pod for p, with the labels its request carries.
func logPod(p *model.Pod) decisionlog.Pod {
	return decisionlog.Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Labels: p.Labels.Map()}
}

func TestDecisionLogFilter(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	master := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("").Priority(0).Model()
	tests := []struct {
		name  string
		pod   *model.Pod
		peers []*model.Pod
		nodes []string
		want  decisionlog.Event
	}{
		{
			name: "no peers: every candidate kept, nothing denied",
			pod:  master,
			want: decisionlog.Event{Outcome: decisionlog.OutcomeFeasible},
		},
		{
			name:  "a master denied the node of another master, with rule and peer",
			pod:   master,
			peers: []*model.Pod{fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Priority(0).Model()},
			want: decisionlog.Event{Outcome: decisionlog.OutcomeFeasible, Denied: []decisionlog.Denial{
				{Node: "node-2", Rule: "redis-masters", Peer: "shop/cache-1-master"},
			}},
		},
		{
			name:  "every candidate denied: unschedulable",
			pod:   master,
			peers: []*model.Pod{fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Priority(0).Model()},
			nodes: []string{"node-2"},
			want: decisionlog.Event{Outcome: decisionlog.OutcomeUnschedulable, Denied: []decisionlog.Denial{
				{Node: "node-2", Rule: "redis-masters", Peer: "shop/cache-1-master"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordLog{}
			d, _ := newDeciderWith(t, tt.peers, prometheus.NewRegistry(), Options{DecisionLog: rec})
			nodes := candidates
			if tt.nodes != nil {
				nodes = tt.nodes
			}
			if _, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(tt.pod), NodeNames: names(nodes...)}); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Verb, want.Pod, want.Nodes, want.Bundles = decisionlog.VerbFilter, logPod(tt.pod), nodes, bundlesOf(d)
			if diff := cmp.Diff(want, rec.only(t), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("filter event (-want +got):\n%s", diff)
			}
		})
	}
}

// A verb that fails says so, with the error, under outcome "error".
func TestDecisionLogErrors(t *testing.T) {
	rec := &recordLog{}
	d, _ := newDeciderWith(t, nil, prometheus.NewRegistry(), Options{DecisionLog: rec})
	d.policies = staticPolicies{} // no policy is active
	pod := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("").Priority(0).Model()
	calls := []struct {
		verb decisionlog.Verb
		call func() error
	}{
		{decisionlog.VerbFilter, func() error {
			_, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(pod), NodeNames: names("node-1")})
			return err
		}},
		{decisionlog.VerbPrioritize, func() error {
			_, err := d.Prioritize(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(pod), NodeNames: names("node-1")})
			return err
		}},
		{decisionlog.VerbPreempt, func() error {
			_, err := d.Preempt(context.Background(), &extenderv1.ExtenderPreemptionArgs{Pod: pendingPod(pod)})
			return err
		}},
		{decisionlog.VerbBind, func() error { return d.Bind(context.Background(), bindArgs(pod, "node-1")) }},
	}
	for _, c := range calls {
		t.Run(string(c.verb), func(t *testing.T) {
			rec.events = nil
			err := c.call()
			if !errors.Is(err, ErrNoPolicy) {
				t.Fatalf("%s = %v, want ErrNoPolicy", c.verb, err)
			}
			got := rec.only(t)
			view := []string{string(got.Verb), got.Outcome, got.Error}
			if diff := cmp.Diff([]string{string(c.verb), decisionlog.OutcomeError, err.Error()}, view); diff != "" {
				t.Errorf("event verb, outcome, error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecisionLogPrioritize(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	tests := []struct {
		name  string
		pod   *model.Pod
		peers []*model.Pod
		want  decisionlog.Event
	}{
		{
			name: "no peers, no preference",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("").Priority(0).Model(),
			want: decisionlog.Event{Outcome: decisionlog.OutcomeNoPreference},
		},
		{
			// As TestPrioritize: scores 0, 7, 10, 3; those below 10 listed.
			name: "the penalised candidates' scores",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("").Priority(0).Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Priority(0).Model(),
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Priority(0).Model(),
			},
			want: decisionlog.Event{Outcome: decisionlog.OutcomeScored, Scores: map[string]int64{"node-1": 0, "node-2": 7, "node-4": 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordLog{}
			d, _ := newDeciderWith(t, tt.peers, prometheus.NewRegistry(), Options{DecisionLog: rec})
			if _, err := d.PrioritizeList(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(tt.pod), NodeNames: names(candidates...)}); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Verb, want.Pod, want.Nodes, want.Bundles = decisionlog.VerbPrioritize, logPod(tt.pod), candidates, bundlesOf(d)
			if diff := cmp.Diff(want, rec.only(t), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("prioritize event (-want +got):\n%s", diff)
			}
		})
	}
}

// Prioritize lists at most MaxListed scores, however many candidates are
// penalised, and says it cut them.
func TestDecisionLogPrioritizeBounded(t *testing.T) {
	candidates := make([]string, 5000)
	for i := range candidates {
		candidates[i] = fmt.Sprintf("node-%d", i+1)
	}
	// A data pod on each of 299 candidates: the spread over nodes
	// penalises all of them.
	var peers []*model.Pod
	for i := 1; i < 300; i++ {
		peers = append(peers, fixture.MakePod().Namespace("logs").Name(fmt.Sprintf("es-data-p%d", i)).Elasticsearch("es", "data").Node(candidates[i]).Model())
	}
	rec := &recordLog{}
	d, _ := newDeciderWith(t, peers, prometheus.NewRegistry(), Options{DecisionLog: rec})
	if _, err := d.PrioritizeList(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(fixture.MakePod().Namespace("logs").Name("es-data-new").Elasticsearch("es", "data").Node("").Model()), NodeNames: &candidates}); err != nil {
		t.Fatal(err)
	}
	got := rec.only(t)
	view := []any{got.Outcome, len(got.Scores), got.Truncated, len(got.Nodes)}
	want := []any{decisionlog.OutcomeScored, decisionlog.MaxListed, []string{decisionlog.TruncatedScores}, 5000}
	if diff := cmp.Diff(want, view); diff != "" {
		t.Errorf("outcome, scores, truncated, nodes handed to Enqueue (-want +got):\n%s", diff)
	}
}

func TestDecisionLogPreempt(t *testing.T) {
	bound := []*model.Pod{
		fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("node-1").Priority(0).Model(), // low priority, conflicts with master 0
		fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Priority(0).Model(),   // low priority, but protected
	}
	pod := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("").Priority(1000).Model()
	tests := []struct {
		name string
		args map[string]*extenderv1.MetaVictims
		want decisionlog.Event
	}{
		{
			name: "the conflicting peer added as victim, by name",
			args: map[string]*extenderv1.MetaVictims{"node-1": meta(), "node-2": meta("uid-cache-1-master")},
			want: decisionlog.Event{NodeCount: 2, Outcome: decisionlog.OutcomeFeasible,
				Victims: []decisionlog.Victim{{Node: "node-1", Pods: []string{"shop/cache-0-replica"}}}},
		},
		{
			name: "a victim regosched does not know, by UID",
			args: map[string]*extenderv1.MetaVictims{"node-3": meta("uid-unknown")},
			want: decisionlog.Event{NodeCount: 1, Outcome: decisionlog.OutcomeFeasible,
				Victims: []decisionlog.Victim{{Node: "node-3", Pods: []string{"uid-unknown"}}}},
		},
		{
			name: "no candidate kept",
			args: map[string]*extenderv1.MetaVictims{"node-2": meta("uid-cache-1-master")},
			want: decisionlog.Event{NodeCount: 1, Outcome: decisionlog.OutcomeUnschedulable},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordLog{}
			d, _ := newDeciderWith(t, bound, prometheus.NewRegistry(), Options{DecisionLog: rec})
			if _, err := d.Preempt(context.Background(), &extenderv1.ExtenderPreemptionArgs{Pod: pendingPod(pod), NodeNameToMetaVictims: tt.args}); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Verb, want.Pod, want.Bundles = decisionlog.VerbPreempt, logPod(pod), bundlesOf(d)
			if diff := cmp.Diff(want, rec.only(t), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("preempt event (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecisionLogBind(t *testing.T) {
	other := fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Priority(0).Model()
	pod := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("").Priority(0).Model()
	tests := []struct {
		name    string
		node    string
		want    decisionlog.Event
		wantErr bool
	}{
		{name: "bound", node: "node-1", want: decisionlog.Event{Outcome: decisionlog.OutcomeBound}},
		{name: "refused by a rule, with rule and peer", node: "node-2", wantErr: true, want: decisionlog.Event{
			Outcome: decisionlog.OutcomeRefused,
			Denied:  []decisionlog.Denial{{Node: "node-2", Rule: "redis-masters", Peer: "shop/cache-1-master"}},
		}},
		{name: "refused: unknown node", node: "node-9", wantErr: true, want: decisionlog.Event{Outcome: decisionlog.OutcomeRefused}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordLog{}
			d, client := newDeciderWith(t, []*model.Pod{other}, prometheus.NewRegistry(), Options{DecisionLog: rec})
			bindLikeAPIServer(client)
			createPending(t, client, pod)
			err := d.Bind(context.Background(), bindArgs(pod, tt.node))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Bind() = %v, want error %v", err, tt.wantErr)
			}
			want := tt.want
			want.Verb, want.Node, want.Bundles = decisionlog.VerbBind, tt.node, bundlesOf(d)
			want.Pod = decisionlog.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}
			if err != nil {
				want.Error = err.Error()
			}
			if diff := cmp.Diff(want, rec.only(t), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("bind event (-want +got):\n%s", diff)
			}
		})
	}
}

// stalledSink never finishes a write until released.
type stalledSink struct{ release chan struct{} }

func (s stalledSink) Write(ctx context.Context, _ [][]byte) error {
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return errors.New("stalled")
}

func (stalledSink) Close() error { return nil }

// TestDecisionLogStalledSinkNeverBlocks: with a sink that never returns
// and a tiny buffer, the verbs decide as fast as ever; what does not fit
// is dropped and counted.
func TestDecisionLogStalledSinkNeverBlocks(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	sink := stalledSink{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	l, err := decisionlog.New(decisionlog.Config{Sink: sink, SampleRate: 1, MaxEvents: 4, FlushBytes: 1, FlushInterval: time.Hour,
		InstanceID: "test", Registerer: reg, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(sink.release)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Close(ctx)
	}()
	peers := []*model.Pod{fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Priority(0).Model()}
	d, client := newDeciderWith(t, peers, prometheus.NewRegistry(), Options{DecisionLog: l})
	bindLikeAPIServer(client)
	const calls = 200
	start := time.Now()
	for i := range calls {
		pod := fixture.MakePod().Namespace("shop").Name(fmt.Sprintf("cache-%d-replica", i+2)).Redis("cache", "replica", fmt.Sprint(i+2)).Model()
		if _, err := d.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(pod), NodeNames: names("node-1", "node-2", "node-3")}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("%d filter calls took %v behind a stalled sink", calls, took)
	}
	dropped := testutil.ToFloat64(l.Dropped().WithLabelValues(decisionlog.ReasonBufferEvents))
	// At most the buffer and the one batch stuck in the sink were kept.
	if dropped < calls-8 {
		t.Errorf("dropped{%s} = %v after %d calls into a buffer of 4, want at least %d", decisionlog.ReasonBufferEvents, dropped, calls, calls-8)
	}
}
