package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/placement"
)

func TestCompileRejectsBrokenBundles(t *testing.T) {
	tests := []struct {
		bundle string
		// want are parts of the error that say what is wrong.
		want []string
	}{
		{"syntax-error", []string{"keys.rego", "rego_parse_error"}},
		{"missing-peer-keys", []string{"policy defines no rule data.regosched.peer_keys"}},
		{"missing-conflicts", []string{"policy defines no rule data.regosched.filter.conflicts"}},
		{"missing-penalties", []string{"policy defines no rule data.regosched.prioritize.penalties"}},
		{"eval-conflict", []string{
			"evaluating policy on a sample pod",
			"evaluating data.regosched.filter.conflicts",
			"eval_conflict_error: rule data.regosched.filter.limit produced conflicting values",
		}},
		{"facts-conflict", []string{
			"evaluating policy on a sample pod",
			"evaluating data.regosched.peer_keys, data.regosched.facts",
			"eval_conflict_error",
		}},
		{"non-string-keys", []string{
			"evaluating policy on a sample pod",
			"data.regosched.peer_keys: key 6 is not a string",
		}},
		{"conflict-without-node", []string{
			"evaluating policy on a sample pod",
			"data.regosched.filter.conflicts",
			"has no node",
		}},
		{"claims-negative-weight", []string{
			"evaluating policy on a sample pod",
			"data.regosched.claims spread: weight of",
			"is not a non-negative number",
		}},
		{"negative-weight", []string{
			"evaluating policy on a sample pod",
			"data.regosched.prioritize.penalties: weight of",
			"is not a non-negative number",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.bundle, func(t *testing.T) {
			err := loadAndCompile("../../testdata/policy/" + tt.bundle)
			if err == nil {
				t.Fatal("bundle accepted, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func loadAndCompile(dir string) error {
	b, err := Load(dir)
	if err != nil {
		return err
	}
	_, err = Compile(context.Background(), b)
	return err
}

const (
	nameLabel      = "app.kubernetes.io/name"
	instanceLabel  = "app.kubernetes.io/instance"
	componentLabel = "app.kubernetes.io/component"
	shardLabel     = "regosched.io/shard"
	eckCluster     = "elasticsearch.k8s.elastic.co/cluster-name"
	eckData        = "elasticsearch.k8s.elastic.co/node-data"
	zoneLabel      = "topology.kubernetes.io/zone"
	hostnameLabel  = "kubernetes.io/hostname"
)

func redis(instance, component, shard string) map[string]string {
	l := map[string]string{nameLabel: "redis", instanceLabel: instance, componentLabel: component}
	if shard != "" {
		l[shardLabel] = shard
	}
	return l
}

// es labels a pod of the Elasticsearch cluster "logs".
func es(component string) map[string]string {
	return map[string]string{nameLabel: "elasticsearch", instanceLabel: "logs", componentLabel: component}
}

func eck(cluster, data string) map[string]string {
	return map[string]string{eckCluster: cluster, eckData: data}
}

// pod is a pod of namespace shop; node "" makes it pending.
func pod(name, uid, node string, labels map[string]string) *placement.Pod {
	return &placement.Pod{Namespace: "shop", Name: name, UID: types.UID(uid), Labels: placement.NewLabels(labels), Node: node}
}

func inNamespace(ns string, p *placement.Pod) *placement.Pod {
	p.Namespace = ns
	return p
}

func TestPeerKeysDefaultPolicy(t *testing.T) {
	p := mustDefaultPolicy(t)
	both := es("data")
	both[eckCluster] = "logs-eck"
	tests := []struct {
		name string
		pod  *placement.Pod
		want []string
	}{
		{"redis", pod("cache-0-master", "u0", "", redis("cache", "master", "")), []string{"redis/shop/cache"}},
		{"redis, other namespace", inNamespace("ops", pod("cache-0-master", "u0", "", redis("cache", "master", ""))), []string{"redis/ops/cache"}},
		{"elasticsearch", pod("logs-data-0", "u0", "", es("data")), []string{"elasticsearch/shop/logs"}},
		{"eck", pod("logs-es-data-0", "u0", "", eck("logs", "true")), []string{"elasticsearch-eck/shop/logs"}},
		{"two workload entries", pod("logs-data-0", "u0", "", both), []string{"elasticsearch-eck/shop/logs-eck", "elasticsearch/shop/logs"}},
		{"bound pod", pod("cache-0-master", "u0", "node-1", redis("cache", "master", "")), []string{"redis/shop/cache"}},
		{"empty cluster label", pod("cache-0", "u0", "", redis("", "master", "")), nil},
		{"unrelated labels", pod("web-0", "u0", "", map[string]string{nameLabel: "web", instanceLabel: "web"}), nil},
		{"nil labels", pod("bare", "u0", "", nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.PeerKeys(context.Background(), tt.pod)
			if err != nil {
				t.Fatalf("PeerKeys() error = %v", err)
			}
			if diff := gocmp.Diff(tt.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("PeerKeys() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// sortedCopy returns a sorted copy of xs (xs itself when empty): the order
// of a Rego set's members is not part of the contract.
func sortedCopy[T any](xs []T, compare func(a, b T) int) []T {
	if len(xs) == 0 {
		return xs
	}
	return slices.SortedStableFunc(slices.Values(xs), compare)
}

func sortConflicts(cs []Conflict) []Conflict {
	return sortedCopy(cs, func(a, b Conflict) int {
		return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(string(a.Peer), string(b.Peer)), strings.Compare(a.Node, b.Node))
	})
}

func sortPenalties(ps []Penalty) []Penalty {
	return sortedCopy(ps, func(a, b Penalty) int {
		return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(string(a.Peer), string(b.Peer)),
			strings.Compare(a.TopologyKey, b.TopologyKey), strings.Compare(a.Value, b.Value))
	})
}

func TestConflictsDefaultPolicy(t *testing.T) {
	p := mustDefaultPolicy(t)
	tests := []struct {
		name string
		in   *Input
		want []Conflict
	}{
		{
			name: "redis masters of one cluster",
			in: &Input{
				Pod:   pod("cache-0-master", "pending", "", redis("cache", "master", "")),
				Peers: []*placement.Pod{pod("cache-1-master", "u1", "node-1", redis("cache", "master", ""))},
			},
			want: []Conflict{{Node: "node-1", Rule: "redis-masters", Reason: "redis: master shop/cache-1-master of cluster cache already on this node", Peer: "u1"}},
		},
		{
			name: "redis master vs masters and replicas of shards",
			in: &Input{
				Pod: pod("cache-0-master", "pending", "", redis("cache", "master", "0")),
				Peers: []*placement.Pod{
					pod("cache-1-master", "u1", "node-1", redis("cache", "master", "1")),
					pod("cache-0-replica-0", "u2", "node-2", redis("cache", "replica", "0")),
					pod("cache-1-replica-0", "u3", "node-3", redis("cache", "replica", "1")),
					pod("cache-0-replica-1", "u4", "node-4", redis("cache", "slave", "0")),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}},
			},
			want: []Conflict{
				{Node: "node-2", Rule: "redis-master-replica", Reason: "redis: replica shop/cache-0-replica-0 of cluster cache (shard 0) already on this node", Peer: "u2"},
				{Node: "node-4", Rule: "redis-master-replica", Reason: "redis: replica shop/cache-0-replica-1 of cluster cache (shard 0) already on this node", Peer: "u4"},
				{Node: "node-1", Rule: "redis-masters", Reason: "redis: master shop/cache-1-master of cluster cache already on this node", Peer: "u1"},
			},
		},
		{
			name: "elasticsearch data nodes",
			in: &Input{
				Pod: pod("logs-data-0", "pending", "", es("data")),
				Peers: []*placement.Pod{
					pod("logs-data-1", "u1", "node-1", es("data")),
					pod("logs-master-0", "u2", "node-2", es("master")),
				},
			},
			want: []Conflict{{Node: "node-1", Rule: "elasticsearch-data", Reason: "elasticsearch: data shop/logs-data-1 of cluster logs already on this node", Peer: "u1"}},
		},
		{
			name: "eck data nodes",
			in: &Input{
				Pod: pod("logs-es-data-0", "pending", "", eck("logs", "true")),
				Peers: []*placement.Pod{
					pod("logs-es-data-1", "u1", "node-1", eck("logs", "true")),
					pod("logs-es-master-0", "u2", "node-2", eck("logs", "false")),
					pod("other-es-data-0", "u3", "node-3", eck("other", "true")),
				},
			},
			want: []Conflict{{Node: "node-1", Rule: "elasticsearch-eck-data", Reason: "elasticsearch: data shop/logs-es-data-1 of cluster logs already on this node", Peer: "u1"}},
		},
		{
			name: "self, pending, other namespace and unlabelled peers ignored",
			in: &Input{
				Pod: pod("cache-0-master", "u0", "", redis("cache", "master", "")),
				Peers: []*placement.Pod{
					pod("cache-0-master", "u0", "node-1", redis("cache", "master", "")),
					pod("cache-1-master", "u1", "", redis("cache", "master", "")),
					inNamespace("ops", pod("cache-2-master", "u2", "node-2", redis("cache", "master", ""))),
					pod("cache-3-master", "u3", "node-3", nil),
				},
			},
			want: nil,
		},
		{
			name: "pending pod with nil labels",
			in: &Input{
				Pod:   pod("bare", "pending", "", nil),
				Peers: []*placement.Pod{pod("cache-1-master", "u1", "node-1", redis("cache", "master", ""))},
			},
			want: nil,
		},
		{
			name: "no peers",
			in:   &Input{Pod: pod("cache-0-master", "pending", "", redis("cache", "master", ""))},
			want: nil,
		},
	}
	for _, tt := range tests {
		// The same answers whether the rules read labels or given facts.
		for mode, in := range map[string]*Input{"labels": tt.in, "facts": withFacts(t, p, tt.in)} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				got, err := p.Conflicts(context.Background(), in)
				if err != nil {
					t.Fatalf("Conflicts() error = %v", err)
				}
				if diff := gocmp.Diff(sortConflicts(tt.want), sortConflicts(got)); diff != "" {
					t.Errorf("Conflicts() mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestPenaltiesDefaultPolicy(t *testing.T) {
	p := mustDefaultPolicy(t)
	tests := []struct {
		name string
		in   *Input
		want []Penalty
	}{
		{
			name: "redis: spread across the cluster, zones within the shard",
			in: &Input{
				Pod: pod("cache-0-replica-0", "pending", "", redis("cache", "replica", "0")),
				Peers: []*placement.Pod{
					pod("cache-0-master", "u1", "node-1", redis("cache", "master", "0")),
					pod("cache-1-replica-0", "u2", "node-2", redis("cache", "replica", "1")),
					pod("other-0-master", "u3", "node-3", redis("other", "master", "0")),
				},
				Nodes: map[string]map[string]string{
					"node-1": {zoneLabel: "a", hostnameLabel: "node-1"},
					"node-2": {zoneLabel: "b"},
					"node-3": {zoneLabel: "c"},
				},
			},
			want: []Penalty{
				{TopologyKey: hostnameLabel, Value: "node-1", Weight: 1, Rule: "redis-node-spread", Peer: "u1"},
				{TopologyKey: hostnameLabel, Value: "node-2", Weight: 1, Rule: "redis-node-spread", Peer: "u2"},
				{TopologyKey: zoneLabel, Value: "a", Weight: 2, Rule: "redis-shard-zones", Peer: "u1"},
			},
		},
		{
			name: "peer node without zone, or unknown: spread only",
			in: &Input{
				Pod: pod("cache-0-replica-0", "pending", "", redis("cache", "replica", "0")),
				Peers: []*placement.Pod{
					pod("cache-0-master", "u1", "node-1", redis("cache", "master", "0")),
					pod("cache-0-replica-1", "u2", "node-2", redis("cache", "replica", "0")),
				},
				Nodes: map[string]map[string]string{"node-1": {hostnameLabel: "node-1"}, "node-3": {zoneLabel: "a"}},
			},
			want: []Penalty{
				{TopologyKey: hostnameLabel, Value: "node-1", Weight: 1, Rule: "redis-node-spread", Peer: "u1"},
				{TopologyKey: hostnameLabel, Value: "node-2", Weight: 1, Rule: "redis-node-spread", Peer: "u2"},
			},
		},
		{
			name: "elasticsearch: data zones apart, any role spread",
			in: &Input{
				Pod: pod("logs-data-0", "pending", "", es("data")),
				Peers: []*placement.Pod{
					pod("logs-data-1", "u1", "node-1", es("data")),
					pod("logs-master-0", "u2", "node-2", es("master")),
				},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}, "node-2": {zoneLabel: "b"}},
			},
			want: []Penalty{
				{TopologyKey: zoneLabel, Value: "a", Weight: 2, Rule: "elasticsearch-data-zones", Peer: "u1"},
				{TopologyKey: hostnameLabel, Value: "node-1", Weight: 1, Rule: "elasticsearch-node-spread", Peer: "u1"},
				{TopologyKey: hostnameLabel, Value: "node-2", Weight: 1, Rule: "elasticsearch-node-spread", Peer: "u2"},
			},
		},
		{
			name: "eck master: spread only",
			in: &Input{
				Pod:   pod("logs-es-master-0", "pending", "", eck("logs", "false")),
				Peers: []*placement.Pod{pod("logs-es-data-0", "u1", "node-1", eck("logs", "true"))},
				Nodes: map[string]map[string]string{"node-1": {zoneLabel: "a"}},
			},
			want: []Penalty{{TopologyKey: hostnameLabel, Value: "node-1", Weight: 1, Rule: "elasticsearch-eck-node-spread", Peer: "u1"}},
		},
		{
			name: "nil labels",
			in: &Input{
				Pod:   pod("bare", "pending", "", nil),
				Peers: []*placement.Pod{pod("cache-0-master", "u1", "node-1", nil)},
				Nodes: map[string]map[string]string{"node-1": nil},
			},
			want: nil,
		},
	}
	for _, tt := range tests {
		// The same answers whether the rules read labels or given facts.
		for mode, in := range map[string]*Input{"labels": tt.in, "facts": withFacts(t, p, tt.in)} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				got, err := p.Penalties(context.Background(), in)
				if err != nil {
					t.Fatalf("Penalties() error = %v", err)
				}
				if diff := gocmp.Diff(sortPenalties(tt.want), sortPenalties(got)); diff != "" {
					t.Errorf("Penalties() mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// echoPolicy returns its input, JSON-encoded by Rego, in its results: it
// shows the exact input shape Go builds, and how results are read back.
func echoPolicy() fstest.MapFS {
	return fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains json.marshal(input) if true
`)},
		"regosched/filter.rego": {Data: []byte(`package regosched.filter

conflicts contains {"node": peer.node, "rule": json.marshal(input.pod), "reason": json.marshal(peer), "peer": peer.uid} if {
	some peer in input.peers
}

# Extra fields are ignored; rule, reason and peer may be missing.
conflicts contains {"node": "node-x", "extra": 1} if count(input.peers) > 1
`)},
		"regosched/prioritize.rego": {Data: []byte(`package regosched.prioritize

# No weight: 1.
penalties contains {"topology_key": "nodes", "value": json.marshal(input.nodes), "rule": "echo-nodes"} if true

penalties contains {"topology_key": "kubernetes.io/hostname", "value": peer.node, "weight": 0.5, "rule": "half", "peer": peer.uid} if {
	some peer in input.peers
}

penalties contains {"topology_key": "zone", "value": "a", "weight": 3, "rule": "integer-weight"} if true
`)},
	}
}

func TestInputAndResultConversion(t *testing.T) {
	p := compileFS(t, echoPolicy())
	ctx := context.Background()
	pending := &placement.Pod{Namespace: "shop", Name: "cache-0", UID: "u0", Labels: placement.NewLabels(map[string]string{"app": "cache", "tier": ""}), Priority: -100}
	peer := &placement.Pod{Namespace: "shop", Name: "cache-1", UID: "u1", Priority: 2000000000, Node: "node-1"}
	peer2 := &placement.Pod{Namespace: "ops", Name: "cache-2", UID: "u2", Labels: placement.NewLabels(map[string]string{}), Node: "node-2"}

	const pendingJSON = `{"labels":{"app":"cache","tier":""},"name":"cache-0","namespace":"shop","node":"","priority":-100,"uid":"u0"}`

	t.Run("PeerKeys", func(t *testing.T) {
		got, err := p.PeerKeys(ctx, pending)
		if err != nil {
			t.Fatalf("PeerKeys() error = %v", err)
		}
		want := []string{`{"pod":` + pendingJSON + `}`}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("PeerKeys() mismatch (-want +got):\n%s", diff)
		}
	})

	in := &Input{
		Pod:   pending,
		Peers: []*placement.Pod{peer, peer2},
		Nodes: map[string]map[string]string{"node-1": {"topology.kubernetes.io/zone": "a"}, "node-2": nil},
	}
	t.Run("Conflicts", func(t *testing.T) {
		got, err := p.Conflicts(ctx, in)
		if err != nil {
			t.Fatalf("Conflicts() error = %v", err)
		}
		want := []Conflict{
			{Node: "node-1", Rule: pendingJSON, Reason: `{"labels":{},"name":"cache-1","namespace":"shop","node":"node-1","priority":2000000000,"uid":"u1"}`, Peer: "u1"},
			{Node: "node-2", Rule: pendingJSON, Reason: `{"labels":{},"name":"cache-2","namespace":"ops","node":"node-2","priority":0,"uid":"u2"}`, Peer: "u2"},
			{Node: "node-x"},
		}
		if diff := gocmp.Diff(sortConflicts(want), sortConflicts(got)); diff != "" {
			t.Errorf("Conflicts() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("Penalties", func(t *testing.T) {
		got, err := p.Penalties(ctx, in)
		if err != nil {
			t.Fatalf("Penalties() error = %v", err)
		}
		want := []Penalty{
			{TopologyKey: "nodes", Value: `{"node-1":{"labels":{"topology.kubernetes.io/zone":"a"}},"node-2":{"labels":{}}}`, Weight: 1, Rule: "echo-nodes"},
			{TopologyKey: "kubernetes.io/hostname", Value: "node-1", Weight: 0.5, Rule: "half", Peer: "u1"},
			{TopologyKey: "kubernetes.io/hostname", Value: "node-2", Weight: 0.5, Rule: "half", Peer: "u2"},
			{TopologyKey: "zone", Value: "a", Weight: 3, Rule: "integer-weight"},
		}
		if diff := gocmp.Diff(sortPenalties(want), sortPenalties(got)); diff != "" {
			t.Errorf("Penalties() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("empty input", func(t *testing.T) {
		got, err := p.Penalties(ctx, &Input{Pod: &placement.Pod{}})
		if err != nil {
			t.Fatalf("Penalties() error = %v", err)
		}
		want := []Penalty{
			{TopologyKey: "nodes", Value: `{}`, Weight: 1, Rule: "echo-nodes"},
			{TopologyKey: "zone", Value: "a", Weight: 3, Rule: "integer-weight"},
		}
		if diff := gocmp.Diff(sortPenalties(want), sortPenalties(got)); diff != "" {
			t.Errorf("Penalties() mismatch (-want +got):\n%s", diff)
		}
	})
}

// Results that pass the load-time smoke test but are malformed on a real
// input are reported as errors, not silently dropped.
func TestMalformedResults(t *testing.T) {
	fsys := minimal()
	fsys["regosched/keys.rego"] = &fstest.MapFile{Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""

peer_keys contains 7 if input.pod.labels.bad == "keys"
`)}
	fsys["regosched/filter.rego"] = &fstest.MapFile{Data: []byte(`package regosched.filter

conflicts contains {"node": peer.node, "rule": "r"} if {
	some peer in input.peers
}

conflicts contains "not an object" if input.pod.labels.bad == "conflicts"
`)}
	fsys["regosched/prioritize.rego"] = &fstest.MapFile{Data: []byte(`package regosched.prioritize

penalties contains {"topology_key": "kubernetes.io/hostname", "value": "v", "weight": "heavy"} if input.pod.labels.bad == "weight"

penalties contains {"value": "v"} if input.pod.labels.bad == "topology"
`)}
	p := compileFS(t, fsys)
	ctx := context.Background()
	bad := func(what string) *placement.Pod {
		return &placement.Pod{Namespace: "shop", Name: "p", UID: "u", Labels: placement.NewLabels(map[string]string{"bad": what})}
	}
	tests := []struct {
		name string
		eval func() error
		want string
	}{
		{"non-string key", func() error { _, err := p.PeerKeys(ctx, bad("keys")); return err }, "data.regosched.peer_keys: key 7 is not a string"},
		{"conflict not an object", func() error { _, err := p.Conflicts(ctx, &Input{Pod: bad("conflicts")}); return err }, `data.regosched.filter.conflicts: "not an object" is not an object`},
		{"weight not a number", func() error { _, err := p.Penalties(ctx, &Input{Pod: bad("weight")}); return err }, "data.regosched.prioritize.penalties: weight of"},
		{"penalty without topology_key", func() error { _, err := p.Penalties(ctx, &Input{Pod: bad("topology")}); return err }, "has no topology_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.eval()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// redisCluster is a pending replica of shard 0 and the six bound pods of a
// three-shard Redis cluster.
func redisCluster() *Input {
	in := &Input{
		Pod:   pod("cache-0-replica-1", "pending", "", redis("cache", "replica", "0")),
		Nodes: map[string]map[string]string{},
	}
	for shard := range 3 {
		for i, role := range []string{"master", "replica"} {
			node := fmt.Sprintf("node-%d", shard*2+i)
			name := fmt.Sprintf("cache-%d-%s", shard, role)
			in.Peers = append(in.Peers, pod(name, "uid-"+name, node, redis("cache", role, fmt.Sprint(shard))))
			in.Nodes[node] = map[string]string{zoneLabel: fmt.Sprintf("zone-%d", i), hostnameLabel: node}
		}
	}
	return in
}

func BenchmarkPeerKeys(b *testing.B) {
	p := mustDefaultPolicy(b)
	ctx := context.Background()
	in := redisCluster()
	b.ReportAllocs()
	for b.Loop() {
		keys, err := p.PeerKeys(ctx, in.Pod)
		if err != nil || len(keys) != 1 {
			b.Fatalf("PeerKeys() = %v, %v", keys, err)
		}
	}
}

func BenchmarkConflicts(b *testing.B) {
	p := mustDefaultPolicy(b)
	ctx := context.Background()
	in := redisCluster()
	b.ReportAllocs()
	for b.Loop() {
		cs, err := p.Conflicts(ctx, in)
		if err != nil || len(cs) != 1 { // the master of shard 0
			b.Fatalf("Conflicts() = %v, %v", cs, err)
		}
	}
}

func BenchmarkPenalties(b *testing.B) {
	p := mustDefaultPolicy(b)
	ctx := context.Background()
	in := redisCluster()
	b.ReportAllocs()
	for b.Loop() {
		ps, err := p.Penalties(ctx, in)
		if err != nil || len(ps) == 0 {
			b.Fatalf("Penalties() = %v, %v", ps, err)
		}
	}
}

// TestJudgeEqualsConflictsAndPenalties: the one-pass evaluation answers
// exactly what the two rules answer apart, with or without facts.
func TestJudgeEqualsConflictsAndPenalties(t *testing.T) {
	p := mustDefaultPolicy(t)
	ctx := context.Background()
	in := redisCluster()
	wantC, err := p.Conflicts(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	wantP, err := p.Penalties(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	gotC, gotP, err := p.Judge(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(wantC) == 0 || len(wantP) == 0 {
		t.Fatalf("fixture gives %d conflicts and %d penalties; want some of each", len(wantC), len(wantP))
	}
	if diff := gocmp.Diff(wantC, gotC); diff != "" {
		t.Errorf("Judge() conflicts mismatch (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(wantP, gotP); diff != "" {
		t.Errorf("Judge() penalties mismatch (-want +got):\n%s", diff)
	}
	// Facts only save work: the same answers as from labels.
	gotC, gotP, err = p.Judge(ctx, withFacts(t, p, in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(wantC, gotC); diff != "" {
		t.Errorf("Judge() with facts: conflicts mismatch (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(wantP, gotP); diff != "" {
		t.Errorf("Judge() with facts: penalties mismatch (-want +got):\n%s", diff)
	}
}

// withFacts is in with each pod carrying the facts p gives it (none for a
// pod in no group), as the placement cache (peers) and the decider (pending
// pod) hand them over.
func withFacts(tb testing.TB, p *Policy, in *Input) *Input {
	tb.Helper()
	described := func(pod *placement.Pod) *placement.Pod {
		c := *pod
		var err error
		if _, c.Facts, err = p.Describe(context.Background(), pod); err != nil {
			tb.Fatalf("Describe(%s) error = %v", pod.Key(), err)
		}
		return &c
	}
	out := &Input{Pod: described(in.Pod), Nodes: in.Nodes}
	for _, peer := range in.Peers {
		out.Peers = append(out.Peers, described(peer))
	}
	return out
}

func BenchmarkJudge(b *testing.B) {
	p := mustDefaultPolicy(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		in   *Input
	}{
		{"facts=labels", redisCluster()},
		{"facts=given", withFacts(b, p, redisCluster())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := p.Judge(ctx, bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDescribe(b *testing.B) {
	p := mustDefaultPolicy(b)
	ctx := context.Background()
	in := redisCluster()
	b.ReportAllocs()
	for b.Loop() {
		keys, facts, err := p.Describe(ctx, in.Pod)
		if err != nil || len(keys) != 1 || facts == nil {
			b.Fatalf("Describe() = %v, %v, %v", keys, facts, err)
		}
	}
}

func TestNewInput(t *testing.T) {
	labels := map[string]map[string]string{"n1": {"zone": "a"}, "n2": {"zone": "b"}}
	lookup := func(node string) (map[string]string, bool) { l, ok := labels[node]; return l, ok }
	pod := &placement.Pod{Name: "p"}
	tests := []struct {
		name  string
		peers []*placement.Pod
		want  map[string]map[string]string
	}{
		{name: "no peers", want: map[string]map[string]string{}},
		{name: "two peers on one node, one on another", peers: []*placement.Pod{{Name: "a", Node: "n1"}, {Name: "b", Node: "n1"}, {Name: "c", Node: "n2"}},
			want: map[string]map[string]string{"n1": {"zone": "a"}, "n2": {"zone": "b"}}},
		{name: "a node the cache does not know is left out", peers: []*placement.Pod{{Name: "a", Node: "gone"}},
			want: map[string]map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := NewInput(pod, tt.peers, lookup)
			if in.Pod != pod || len(in.Peers) != len(tt.peers) {
				t.Errorf("NewInput kept pod %v and %d peers, want %v and %d", in.Pod, len(in.Peers), pod, len(tt.peers))
			}
			if diff := gocmp.Diff(tt.want, in.Nodes); diff != "" {
				t.Errorf("Nodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSumByDomain(t *testing.T) {
	got := SumByDomain([]Penalty{
		{TopologyKey: HostnameKey, Value: "n1", Weight: 1},
		{TopologyKey: HostnameKey, Value: "n1", Weight: 1},
		{TopologyKey: HostnameKey, Value: "n2", Weight: 1},
		{TopologyKey: "topology.kubernetes.io/zone", Value: "zone-a", Weight: 2},
	})
	want := map[string]map[string]float64{
		HostnameKey:                   {"n1": 2, "n2": 1},
		"topology.kubernetes.io/zone": {"zone-a": 2},
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("SumByDomain (-want +got):\n%s", diff)
	}
}
