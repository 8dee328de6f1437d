package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/test/fixture"
)

// loggedEvent is what the tests compare of an event: its lists sorted,
// since Filter's calls come in any order.
type loggedEvent struct {
	Path      string
	Pod       string
	Revision  bool // the policy revision is named
	Nodes     []string
	NodeCount int
	Outcome   string
	Denied    []decisionlog.Denial
	Scores    map[string]int64
	Node      string
	Error     bool
	Truncated []string
}

// recordSink decodes the events it is sent; with block set, each Write
// waits for block to close (or for the logger to give up).
type recordSink struct {
	mu     sync.Mutex
	events []loggedEvent
	block  chan struct{}
}

func (r *recordSink) Write(ctx context.Context, batch [][]byte) error {
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return fmt.Errorf("stalled sink: %w", ctx.Err())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range batch {
		var w struct {
			Bundles map[string]struct {
				Revision string `json:"revision"`
			} `json:"bundles"`
			Path  string `json:"path"`
			Input struct {
				Pod struct {
					Namespace, Name string
				} `json:"pod"`
				Nodes     []string `json:"nodes"`
				NodeCount int      `json:"node_count"`
			} `json:"input"`
			Result struct {
				Outcome string               `json:"outcome"`
				Denied  []decisionlog.Denial `json:"denied"`
				Scores  map[string]int64     `json:"scores"`
				Node    string               `json:"node"`
				Error   string               `json:"error"`
			} `json:"result"`
			Truncated []string `json:"truncated"`
		}
		if err := json.Unmarshal(b, &w); err != nil {
			return fmt.Errorf("decode event %s: %w", b, err)
		}
		slices.Sort(w.Input.Nodes)
		slices.SortFunc(w.Result.Denied, func(a, b decisionlog.Denial) int {
			return strings.Compare(a.Node+" "+a.Rule+" "+a.Peer, b.Node+" "+b.Rule+" "+b.Peer)
		})
		r.events = append(r.events, loggedEvent{
			Path: w.Path, Pod: w.Input.Pod.Namespace + "/" + w.Input.Pod.Name, Revision: w.Bundles["regosched"].Revision != "",
			Nodes: w.Input.Nodes, NodeCount: w.Input.NodeCount, Outcome: w.Result.Outcome, Denied: w.Result.Denied,
			Scores: w.Result.Scores, Node: w.Result.Node, Error: w.Result.Error != "", Truncated: w.Truncated,
		})
	}
	return nil
}

func (r *recordSink) Close() error { return nil }

func (r *recordSink) got() []loggedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// TestDecisionLogEvents: one scheduling cycle's extension points, as the
// framework calls them, give the extender's events: filter once the
// filtering is over (the nodes Filter was called for, those turned away
// with rule and peer), prioritize from NormalizeScore (scores below 10 on
// the extender's scale) or PreScore (no preference), bind at PostBind or
// when the reservation is taken back.
func TestDecisionLogEvents(t *testing.T) {
	const (
		masters   = "redis-masters"
		quorum    = "redis-masters-quorum"
		pair      = "redis-master-replica"
		pairZones = "redis-master-replica-zones"
	)
	denied := func(node, rule, peer string) decisionlog.Denial {
		return decisionlog.Denial{Node: node, Rule: rule, Peer: ns + "/" + peer}
	}
	master := fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(0).Node("").Obj()
	replica := fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Priority(0).Node("").Obj()
	plain := fixture.MakePod().Namespace(ns).Name("web").Schedulable().Obj()
	tests := []struct {
		name     string
		pod      *corev1.Pod
		filterOn []string // Filter's calls, in parallel
		// steps after Filter: "PreScore" (with scoreOn), "Score" (Score on
		// scoreOn, then NormalizeScore), "Reserve", "PostBind",
		// "Unreserve" (on node), "PostFilter", "RemovePod" (a dry run's).
		steps   []string
		scoreOn []string
		node    string
		want    []loggedEvent
	}{
		{
			name: "a denied master: one node fits, bound there", pod: master,
			filterOn: []string{"n1", "n2", "n3"}, steps: []string{"Reserve", "PostBind"}, node: "n3",
			want: []loggedEvent{
				{Path: "regosched/filter", Pod: "shop/cache-2-master", Revision: true, Nodes: []string{"n1", "n2", "n3"}, NodeCount: 3,
					// Three masters (the pod counted) may hold one per zone: zone-a (n1) and zone-b (n2) are full.
					Outcome: decisionlog.OutcomeFeasible, Denied: []decisionlog.Denial{
						denied("n1", masters, "cache-0-master"), denied("n1", quorum, "cache-0-master"),
						denied("n2", masters, "cache-1-master"), denied("n2", quorum, "cache-1-master"),
					}},
				{Path: "regosched/bind", Pod: "shop/cache-2-master", Revision: true, Node: "n3", Outcome: decisionlog.OutcomeBound},
			},
		},
		{
			name: "a denied master: no node fits", pod: master,
			filterOn: []string{"n1", "n2"}, steps: []string{"PostFilter"},
			want: []loggedEvent{
				{Path: "regosched/filter", Pod: "shop/cache-2-master", Revision: true, Nodes: []string{"n1", "n2"}, NodeCount: 2,
					// The quorum of three masters refuses zone-a (n1) and zone-b (n2) too.
					Outcome: decisionlog.OutcomeUnschedulable, Denied: []decisionlog.Denial{
						denied("n1", masters, "cache-0-master"), denied("n1", quorum, "cache-0-master"),
						denied("n2", masters, "cache-1-master"), denied("n2", quorum, "cache-1-master"),
					}},
			},
		},
		{
			name: "no node fits and preemption's dry run ends the cycle", pod: master,
			filterOn: []string{"n1", "n2"}, steps: []string{"RemovePod"},
			want: []loggedEvent{
				{Path: "regosched/filter", Pod: "shop/cache-2-master", Revision: true, Nodes: []string{"n1", "n2"}, NodeCount: 2,
					// The quorum of three masters refuses zone-a (n1) and zone-b (n2) too.
					Outcome: decisionlog.OutcomeUnschedulable, Denied: []decisionlog.Denial{
						denied("n1", masters, "cache-0-master"), denied("n1", quorum, "cache-0-master"),
						denied("n2", masters, "cache-1-master"), denied("n2", quorum, "cache-1-master"),
					}},
			},
		},
		{
			name: "a replica: denied beside its master, scored elsewhere", pod: replica,
			filterOn: []string{"n1", "n2", "n3"}, steps: []string{"PreScore", "Score", "Reserve", "PostBind"},
			scoreOn: []string{"n2", "n3"}, node: "n3",
			want: []loggedEvent{
				// n1 is alone in zone-a: the master's rule per zone denies it, and no other node.
				{Path: "regosched/filter", Pod: "shop/cache-0-replica", Revision: true, Nodes: []string{"n1", "n2", "n3"}, NodeCount: 3,
					Outcome: decisionlog.OutcomeFeasible, Denied: []decisionlog.Denial{
						denied("n1", pair, "cache-0-master"), denied("n1", pairZones, "cache-0-master"),
					}},
				{Path: "regosched/prioritize", Pod: "shop/cache-0-replica", Revision: true, Nodes: []string{"n2", "n3"}, NodeCount: 2,
					Outcome: decisionlog.OutcomeScored, Scores: map[string]int64{"n2": 0}},
				{Path: "regosched/bind", Pod: "shop/cache-0-replica", Revision: true, Node: "n3", Outcome: decisionlog.OutcomeBound},
			},
		},
		{
			name: "an allowed pod in no group: Filter skipped", pod: plain,
			steps: []string{"PreScore", "Reserve", "PostBind"}, scoreOn: []string{"n1", "n2", "n3"}, node: "n2",
			want: []loggedEvent{
				{Path: "regosched/filter", Pod: "shop/web", Revision: true, Nodes: []string{"n1", "n2", "n3"}, NodeCount: 3,
					Outcome: decisionlog.OutcomeFeasible},
				{Path: "regosched/prioritize", Pod: "shop/web", Revision: true, Nodes: []string{"n1", "n2", "n3"}, NodeCount: 3,
					Outcome: decisionlog.OutcomeNoPreference},
				{Path: "regosched/bind", Pod: "shop/web", Revision: true, Node: "n2", Outcome: decisionlog.OutcomeBound},
			},
		},
		{
			name: "the reservation taken back", pod: replica,
			filterOn: []string{"n3"}, steps: []string{"Reserve", "Unreserve"}, node: "n3",
			want: []loggedEvent{
				{Path: "regosched/filter", Pod: "shop/cache-0-replica", Revision: true, Nodes: []string{"n3"}, NodeCount: 1,
					Outcome: decisionlog.OutcomeFeasible},
				{Path: "regosched/bind", Pod: "shop/cache-0-replica", Revision: true, Node: "n3", Outcome: decisionlog.OutcomeError, Error: true},
			},
		},
		{
			name: "no node reached Filter: no event", pod: master, steps: []string{"PostFilter"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &recordSink{}
			f := newHarnessWith(t, options{decisionLog: decisionlog.Config{Sink: sink, SampleRate: 1}})
			ctx := context.Background()
			cs := framework.NewCycleState()
			if _, st := f.pl.PreFilter(ctx, cs, tt.pod, nil); !st.IsSuccess() && st.Code() != fwk.Skip {
				t.Fatalf("PreFilter = %v", st)
			}
			var wg sync.WaitGroup
			for _, n := range tt.filterOn {
				wg.Go(func() { f.pl.Filter(ctx, cs, tt.pod, f.nodes[n]) })
			}
			wg.Wait()
			var scoreOn []fwk.NodeInfo
			for _, n := range tt.scoreOn {
				scoreOn = append(scoreOn, f.nodes[n])
			}
			for _, step := range tt.steps {
				switch step {
				case "PreScore":
					f.pl.PreScore(ctx, cs, tt.pod, scoreOn)
				case "Score":
					var scores fwk.NodeScoreList
					for _, ni := range scoreOn {
						s, st := f.pl.Score(ctx, cs, tt.pod, ni)
						if !st.IsSuccess() {
							t.Fatalf("Score = %v", st)
						}
						scores = append(scores, fwk.NodeScore{Name: ni.Node().Name, Score: s})
					}
					f.pl.NormalizeScore(ctx, cs, tt.pod, scores)
				case "Reserve":
					if st := f.pl.Reserve(ctx, cs, tt.pod, tt.node); !st.IsSuccess() {
						t.Fatalf("Reserve = %v", st)
					}
				case "PostBind":
					f.pl.PostBind(ctx, cs, tt.pod, tt.node)
				case "Unreserve":
					f.pl.Unreserve(ctx, cs, tt.pod, tt.node)
				case "PostFilter":
					f.pl.PostFilter(ctx, cs, tt.pod, nil)
				case "RemovePod":
					// Default preemption's dry run on a clone: its
					// Filter calls are no candidates.
					clone := cs.Clone()
					victim := fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1").Obj()
					f.pl.RemovePod(ctx, clone, tt.pod, podInfo(t, victim), f.nodes["n1"])
					f.pl.Filter(ctx, clone, tt.pod, f.nodes["n1"])
					f.pl.Filter(ctx, clone, tt.pod, f.nodes["n3"])
				}
			}
			if err := f.pl.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, sink.got()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if d := dropped(t, f); d != 0 {
				t.Errorf("regosched_decision_logs_dropped_total = %v, want 0", d)
			}
		})
	}
}

// dropped sums regosched_decision_logs_dropped_total on f's registry; -1
// when it is not registered.
func dropped(t *testing.T, f *harness) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "regosched_decision_logs_dropped_total" {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		return sum
	}
	return -1
}

// fullCycle runs a cycle through every extension point the decision log
// uses, for pod bound to n3.
func fullCycle(t *testing.T, f *harness, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	f.pl.PreFilter(ctx, cs, pod, nil)
	var all []fwk.NodeInfo
	for _, n := range slices.Sorted(maps.Keys(f.nodes)) {
		f.pl.Filter(ctx, cs, pod, f.nodes[n])
		all = append(all, f.nodes[n])
	}
	if st := f.pl.PreScore(ctx, cs, pod, all); st.IsSuccess() {
		var scores fwk.NodeScoreList
		for _, ni := range all {
			s, _ := f.pl.Score(ctx, cs, pod, ni)
			scores = append(scores, fwk.NodeScore{Name: ni.Node().Name, Score: s})
		}
		f.pl.NormalizeScore(ctx, cs, pod, scores)
	}
	f.pl.Reserve(ctx, cs, pod, "n3")
	f.pl.PostBind(ctx, cs, pod, "n3")
	f.pl.Unreserve(ctx, cs, pod, "n3") // the cache forgets it: the next cycle starts afresh
}

// TestDecisionLogOff: without a decision log, no cycle builds a record and
// no dropped counter is registered; with a sample of 0, nothing is sent.
func TestDecisionLogOff(t *testing.T) {
	tests := []struct {
		name   string
		config decisionlog.Config
		sink   *recordSink
	}{
		{name: "off"},
		{name: "sample 0", config: decisionlog.Config{SampleRate: 0}, sink: &recordSink{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.sink != nil {
				tt.config.Sink = tt.sink
			}
			f := newHarnessWith(t, options{decisionLog: tt.config})
			pod := fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Priority(0).Node("").Obj()
			cs, _ := f.preFilter(t, pod)
			s, err := getState(cs)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.log != nil, tt.sink != nil; got != want {
				t.Errorf("cycle record built = %v, want %v", got, want)
			}
			fullCycle(t, f, pod)
			if err := f.pl.Close(); err != nil {
				t.Fatal(err)
			}
			if tt.sink != nil {
				if got := tt.sink.got(); len(got) != 0 {
					t.Errorf("events sent: %v, want none", got)
				}
				return
			}
			if d := dropped(t, f); d != -1 {
				t.Errorf("regosched_decision_logs_dropped_total registered (%v) with no decision log", d)
			}
		})
	}
}

// TestDecisionLogNeverBlocks: with a sink that never answers and a buffer
// of 4 events, cycles go on as fast as without, and the events that do
// not fit are dropped and counted.
func TestDecisionLogNeverBlocks(t *testing.T) {
	sink := &recordSink{block: make(chan struct{})}
	f := newHarnessWith(t, options{decisionLog: decisionlog.Config{
		Sink: sink, SampleRate: 1, MaxEvents: 4, FlushBytes: 1, FlushInterval: time.Millisecond,
	}})
	// Registered after the harness, so run before its context ends: the
	// logger's last flush then finds the sink answering.
	t.Cleanup(func() { close(sink.block) })
	const cycles = 50
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range cycles {
			fullCycle(t, f, fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(0).Node("").Obj())
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d cycles did not finish within 30s behind a stalled sink", cycles)
	}
	// Each cycle gives a filter and a bind event; one flush may hold up to
	// 4 in the stalled Write, and the buffer 4 more.
	if d := dropped(t, f); d < 2*cycles-8 {
		t.Errorf("regosched_decision_logs_dropped_total = %v, want at least %d", d, 2*cycles-8)
	}
}

// TestDecisionLogArgs: the plugin arg decisionLog is checked as serve's
// --decision-log* flags are, with errors naming the arg.
func TestDecisionLogArgs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "decisions.log")
	tests := []struct {
		name    string
		raw     string
		wantErr string
		want    decisionlog.Config // Sink not compared
		sink    string             // the sink's type
	}{
		{name: "absent", raw: `{}`},
		{name: "no target", raw: `{"decisionLog":{"sample":0.5}}`},
		{name: "stdout, defaults", raw: `{"decisionLog":{"target":"stdout"}}`,
			want: decisionlog.Config{SampleRate: 1}, sink: "*decisionlog.WriterSink"},
		{name: "a file, every setting", raw: `{"decisionLog":{"target":"` + file + `","sample":0.25,"maskLabels":["team"],"maskMode":"replace","bufferSize":100,"flushInterval":"1s"}}`,
			want: decisionlog.Config{SampleRate: 0.25, MaskLabels: []string{"team"}, MaskMode: decisionlog.MaskReplace, MaxEvents: 100, FlushInterval: time.Second},
			sink: "*decisionlog.FileSink"},
		{name: "an OPA service", raw: `{"decisionLog":{"target":"https://logs.example","timeout":"2s","maxRetries":0,"uploadLimitBytes":65536,"bearerTokenFile":"/var/run/token"}}`,
			want: decisionlog.Config{SampleRate: 1}, sink: "*decisionlog.HTTPSink"},
		{name: "a token over http, insecure", raw: `{"decisionLog":{"target":"http://logs.example","bearerTokenFile":"/t","insecure":true}}`,
			want: decisionlog.Config{SampleRate: 1}, sink: "*decisionlog.HTTPSink"},
		{name: "sample above 1", raw: `{"decisionLog":{"target":"stdout","sample":1.5}}`, wantErr: "decisionLog.sample 1.5: want a share between 0 and 1"},
		{name: "a mask mode", raw: `{"decisionLog":{"target":"stdout","maskMode":"hash"}}`, wantErr: `decisionLog.maskMode "hash": want drop or replace`},
		{name: "a negative buffer", raw: `{"decisionLog":{"target":"stdout","bufferSize":-1}}`, wantErr: "decisionLog.bufferSize cannot be negative"},
		{name: "a flush interval", raw: `{"decisionLog":{"target":"stdout","flushInterval":"0s"}}`, wantErr: `decisionLog.flushInterval: "0s" is not a positive duration`},
		{name: "another scheme", raw: `{"decisionLog":{"target":"ftp://logs.example"}}`, wantErr: `decisionLog.target "ftp://logs.example": want stdout, a file path or an http(s):// URL`},
		{name: "no host", raw: `{"decisionLog":{"target":"https://"}}`, wantErr: `decisionLog.target "https://": no host`},
		{name: "HTTP settings for a file", raw: `{"decisionLog":{"target":"` + file + `","bearerTokenFile":"/t"}}`, wantErr: "decisionLog.bearerTokenFile is for an http(s):// decisionLog.target"},
		{name: "a token in clear", raw: `{"decisionLog":{"target":"http://logs.example","bearerTokenFile":"/t"}}`, wantErr: "would send the token in clear"},
		{name: "a CA file with no certificate", raw: `{"decisionLog":{"target":"https://logs.example","caCert":"` + file + `"}}`, wantErr: "decisionLog.caCert"},
		{name: "a file that cannot be opened", raw: `{"decisionLog":{"target":"/nonexistent/dir/log"}}`, wantErr: "decisionLog.target: decisionlog: open log file"},
		{name: "an unknown field", raw: `{"decisionLog":{"targt":"stdout"}}`, wantErr: `unknown field "targt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := decodeArgs(&runtime.Unknown{Raw: []byte(tt.raw), ContentType: runtime.ContentTypeJSON})
			var cfg Config
			if err == nil {
				cfg, err = args.config(nil, logrus.New())
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), Name+" args: ") {
					t.Fatalf("error = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.DecisionLog
			if sink := got.Sink; sink != nil {
				t.Cleanup(func() { _ = sink.Close() })
			}
			if gotSink := fmt.Sprintf("%T", got.Sink); tt.sink != "" && gotSink != tt.sink {
				t.Errorf("sink = %s, want %s", gotSink, tt.sink)
			}
			if tt.sink == "" && got.Sink != nil {
				t.Errorf("sink = %T, want none", got.Sink)
			}
			got.Sink = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision log config (-want +got):\n%s", diff)
			}
		})
	}
}
