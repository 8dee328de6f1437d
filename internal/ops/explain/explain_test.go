package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/plumbing/output"
	"github.com/regosched/regosched/test/fixture"
)

var zones = map[string]string{"node-1": "zone-a", "node-2": "zone-b", "node-3": "zone-c", "node-4": "zone-a"}

func nodes() []runtime.Object {
	var objs []runtime.Object
	for name, zone := range zones {
		objs = append(objs, fixture.MakeNode().Name(name).Zone(zone).Obj())
	}
	return objs
}

func defaultPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	pol, source, err := bundles.Options{}.LoadLocal(context.Background(), "", regosched.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if source != bundles.EmbeddedName {
		t.Errorf("source = %q, want %q", source, bundles.EmbeddedName)
	}
	return pol
}

func explain(t *testing.T, pol *policy.Policy, pod *corev1.Pod, objs ...runtime.Object) *Report {
	t.Helper()
	log, _ := logtest.NewNullLogger()
	r, err := Explain(context.Background(), pod, Options{
		Client: fake.NewClientset(append(nodes(), objs...)...), Policy: pol, PolicySource: bundles.EmbeddedName, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func score(s int64) *int64 { return &s }

// The redis-masters-quorum reasons of a third master of shop's cluster
// "cache": zones a and c already hold one master each, of three.
const (
	quorumA = "redis: master shop/cache-0-master of cluster cache already in zone zone-a: with this pod 2 of 3 there, fewer than half may be"
	quorumC = "redis: master shop/cache-1-master of cluster cache already in zone zone-c: with this pod 2 of 3 there, fewer than half may be"
)

// shop holds one Redis cluster "cache": shard 0's master on node-1 (low
// priority) and replica on node-2, shard 1's master on node-3 (high
// priority).
func shop() []runtime.Object {
	return []runtime.Object{
		fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Node("node-2").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-3").Priority(1000).Obj(),
	}
}

func TestExplain(t *testing.T) {
	pol := defaultPolicy(t)
	peer := func(name, role, shard, node string, prio int32) Peer {
		return Peer{Pod: "shop/" + name, Node: node, Priority: prio, Labels: fixture.RedisLabels("cache", role, shard)}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		objs []runtime.Object
		want *Report
	}{
		{
			// The policy protects masters from preemption: the lower-priority
			// master's node is no more resolvable than the other.
			name: "a master fails on the nodes of the other masters of its cluster",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-2-master").UID("").Redis("cache", "master", "2").Priority(100).Obj(),
			objs: shop(),
			want: &Report{
				Pod:      "shop/cache-2-master",
				PeerKeys: []string{"redis/shop/cache"},
				Peers: []Peer{
					peer("cache-0-master", "master", "0", "node-1", 0),
					peer("cache-0-replica", "replica", "0", "node-2", 0),
					peer("cache-1-master", "master", "1", "node-3", 1000),
				},
				// Only node-2 passes: no preference left to express.
				Scored: false,
				Nodes: []NodeResult{
					// Three masters (the pod counted) over zones a, b and c: a
					// quorum lets each zone hold one, so zone-a (node-1, node-4)
					// and zone-c (node-3) are full; masters are protected, so
					// preemption cannot help.
					{
						Node: "node-1", Verdict: Unresolvable,
						Reason: quorumA + "; redis: master shop/cache-0-master of cluster cache already on this node",
						Denials: []Denial{
							{Rule: "redis-masters", Peer: "shop/cache-0-master", Reason: "redis: master shop/cache-0-master of cluster cache already on this node"},
							{Rule: "redis-masters-quorum", Peer: "shop/cache-0-master", Reason: quorumA},
						},
					},
					{
						Node: "node-3", Verdict: Unresolvable,
						Reason: quorumC + "; redis: master shop/cache-1-master of cluster cache already on this node",
						Denials: []Denial{
							{Rule: "redis-masters", Peer: "shop/cache-1-master", Reason: "redis: master shop/cache-1-master of cluster cache already on this node"},
							{Rule: "redis-masters-quorum", Peer: "shop/cache-1-master", Reason: quorumC},
						},
					},
					// In zone-a with cache-0-master, though not on its node.
					{Node: "node-4", Verdict: Unresolvable, Reason: quorumA, Denials: []Denial{{Rule: "redis-masters-quorum", Peer: "shop/cache-0-master", Reason: quorumA}}},
					// A peer of the cluster on it: spread.
					{Node: "node-2", Verdict: OK, Score: score(0)},
				},
			},
		},
		{
			name: "a pod no rule applies to passes everywhere, without preference",
			pod:  fixture.MakePod().Namespace("shop").Name("web").UID("").Label("app", "web").Obj(),
			objs: shop(),
			want: &Report{
				Pod:         "shop/web",
				Unprotected: []policy.Unprotected{{Reason: "no_workload", Message: "no workload of the policy matches the pod's labels"}},
				Nodes: []NodeResult{
					{Node: "node-1", Verdict: OK, Score: score(0)},
					{Node: "node-2", Verdict: OK, Score: score(0)},
					{Node: "node-3", Verdict: OK, Score: score(0)},
					{Node: "node-4", Verdict: OK, Score: score(0)},
				},
			},
		},
		{
			name: "a pod without namespace is in default, and its peers are those of default",
			pod:  fixture.MakePod().Name("cache-1-master").UID("").Redis("cache", "master", "1").Obj(),
			objs: append(shop(), fixture.MakePod().Namespace("default").Name("cache-0-master").Redis("cache", "master", "0").Node("node-4").Obj()),
			want: &Report{
				Pod:      "default/cache-1-master",
				PeerKeys: []string{"redis/default/cache"},
				Peers: []Peer{{
					Pod: "default/cache-0-master", Node: "node-4", Labels: fixture.RedisLabels("cache", "master", "0"),
				}},
				// The only penalised node failed: no preference among the rest.
				Nodes: []NodeResult{
					{Node: "node-4", Verdict: Unresolvable, Reason: "redis: master default/cache-0-master of cluster cache already on this node", Denials: []Denial{{Rule: "redis-masters", Peer: "default/cache-0-master", Reason: "redis: master default/cache-0-master of cluster cache already on this node"}}},
					{Node: "node-1", Verdict: OK, Score: score(0)},
					{Node: "node-2", Verdict: OK, Score: score(0)},
					{Node: "node-3", Verdict: OK, Score: score(0)},
				},
			},
		},
		{
			name: "the manifest of a bound pod is not its own peer",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").UID("").Redis("cache", "master", "0").Obj(), // no UID, as written by hand
			objs: shop(),
			want: &Report{
				Pod:      "shop/cache-0-master",
				PeerKeys: []string{"redis/shop/cache"},
				BoundTo:  "node-1",
				Peers: []Peer{
					peer("cache-0-replica", "replica", "0", "node-2", 0),
					peer("cache-1-master", "master", "1", "node-3", 1000),
				},
				Nodes: []NodeResult{
					// The replica of the pod's shard is alone in zone-b: its rule per zone refuses node-2 alone.
					{
						Node: "node-2", Verdict: Unresolvable,
						Reason: "redis: replica shop/cache-0-replica of cluster cache (shard 0) already in zone zone-b; " +
							"redis: replica shop/cache-0-replica of cluster cache (shard 0) already on this node",
						Denials: []Denial{
							{Rule: "redis-master-replica", Peer: "shop/cache-0-replica", Reason: "redis: replica shop/cache-0-replica of cluster cache (shard 0) already on this node"},
							{Rule: "redis-master-replica-zones", Peer: "shop/cache-0-replica", Reason: "redis: replica shop/cache-0-replica of cluster cache (shard 0) already in zone zone-b"},
						},
					},
					{Node: "node-3", Verdict: Unresolvable, Reason: "redis: master shop/cache-1-master of cluster cache already on this node", Denials: []Denial{{Rule: "redis-masters", Peer: "shop/cache-1-master", Reason: "redis: master shop/cache-1-master of cluster cache already on this node"}}},
					{Node: "node-1", Verdict: OK, Score: score(0)},
					{Node: "node-4", Verdict: OK, Score: score(0)},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			got := explain(t, pol, tt.pod, tt.objs...)
			tt.want.Policy = PolicyInfo{Source: bundles.EmbeddedName, Revision: pol.Revision()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Explain() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.pod); diff != "" {
				t.Errorf("Explain() changed the pod (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRenderTable(t *testing.T) {
	pol := defaultPolicy(t)
	r := explain(t, pol, fixture.MakePod().Namespace("shop").Name("cache-2-master").UID("").Redis("cache", "master", "2").Priority(100).Obj(), shop()...)
	var b bytes.Buffer
	if err := Render(&b, r, output.Table); err != nil {
		t.Fatal(err)
	}
	want := `Pod:       shop/cache-2-master
Policy:    ` + bundles.EmbeddedName + `, revision ` + pol.Revision() + `
Peer keys: redis/shop/cache
Peers:     shop/cache-0-master on node-1
           shop/cache-0-replica on node-2
           shop/cache-1-master on node-3
Nodes:     4: 1 ok, 0 failed, 3 unresolvable
Scores:    no preference among the nodes that pass: every one scores 0

NODE    VERDICT       SCORE  REASON
node-1  unresolvable  -      ` + quorumA + `; redis: master shop/cache-0-master of cluster cache already on this node
node-3  unresolvable  -      ` + quorumC + `; redis: master shop/cache-1-master of cluster cache already on this node
node-4  unresolvable  -      ` + quorumA + `
node-2  ok            0
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table mismatch (-want +got):\n%s", diff)
	}

	// The header of a pod no rule applies to says so, and why.
	r = explain(t, pol, fixture.MakePod().Name("web").UID("").Obj())
	b.Reset()
	if err := Render(&b, r, output.Table); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Pod:             default/web\n",
		"No rule applies: no workload of the policy matches the pod's labels\n",
		"Peer keys:       none: no rule of this policy applies to the pod\n",
		"Scores:          no preference among the nodes that pass: every one scores 0\n",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, b.String())
		}
	}
}

func TestRenderJSON(t *testing.T) {
	pol := defaultPolicy(t)
	r := explain(t, pol, fixture.MakePod().Namespace("shop").Name("cache-2-master").UID("").Redis("cache", "master", "2").Priority(100).Obj(), shop()...)
	var b bytes.Buffer
	if err := Render(&b, r, output.JSON); err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JSON output does not parse: %v\n%s", err, b.String())
	}
	if diff := cmp.Diff(r, &got); diff != "" {
		t.Errorf("JSON round trip mismatch (-want +got):\n%s", diff)
	}
	// Field names a script relies on.
	var raw struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	// node-1 breaks redis-masters-quorum too: zone-a holds one of three masters.
	if diff := cmp.Diff(map[string]any{
		"node": "node-1", "verdict": "unresolvable", "reason": quorumA + "; redis: master shop/cache-0-master of cluster cache already on this node",
		"denials": []any{
			map[string]any{
				"rule": "redis-masters", "peer": "shop/cache-0-master",
				"reason": "redis: master shop/cache-0-master of cluster cache already on this node",
			},
			map[string]any{"rule": "redis-masters-quorum", "peer": "shop/cache-0-master", "reason": quorumA},
		},
	}, raw.Nodes[0]); diff != "" {
		t.Errorf("first node in JSON mismatch (-want +got):\n%s", diff)
	}
}

func TestExplainAPIErrors(t *testing.T) {
	pol := defaultPolicy(t)
	tests := []struct {
		name     string
		resource string
		want     string
	}{
		{"nodes", "nodes", "listing nodes from the API server: nodes is forbidden"},
		{"pods", "pods", "listing pods from the API server: pods is forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(nodes()...)
			client.PrependReactor("list", tt.resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New(tt.resource + " is forbidden")
			})
			log, _ := logtest.NewNullLogger()
			_, err := Explain(
				context.Background(),
				fixture.MakePod().Namespace("shop").Name("m").UID("").Redis("cache", "master", "0").Obj(),
				Options{Client: client, Policy: pol, Log: log},
			)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Explain() error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestExplainSyncTimeout: an API server that answers the first list but not
// the informers' gives up after SyncTimeout, saying so.
func TestExplainSyncTimeout(t *testing.T) {
	client := fake.NewClientset(nodes()...)
	var failed atomic.Int32
	client.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if l, ok := a.(k8stesting.ListActionImpl); ok && l.ListOptions.Limit == 1 {
			return false, nil, nil // Explain's own check: answered
		}
		failed.Add(1)
		return true, nil, errors.New("etcd is down") // the informer's list
	})
	log, _ := logtest.NewNullLogger()
	start := time.Now()
	_, err := Explain(context.Background(), fixture.MakePod().Namespace("shop").Name("m").UID("").Redis("cache", "master", "0").Obj(), Options{
		Client: client, Policy: defaultPolicy(t), SyncTimeout: 300 * time.Millisecond, Log: log,
	})
	if want := "did not sync with the API server within 300ms"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Explain() error = %v, want %q", err, want)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Explain() took %s with a 300ms timeout", took)
	}
	if failed.Load() == 0 {
		t.Error("the informer never listed nodes")
	}
}
