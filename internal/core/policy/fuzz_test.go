package policy

import (
	"context"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/core/model"
)

// FuzzInput builds inputs from arbitrary names and label values and checks
// that the default policy answers every entry point without an error: no
// label a user can set may make a decision fail.
func FuzzInput(f *testing.F) {
	p := mustDefaultPolicy(f)
	f.Add("shop", "cache-0", "redis", "cache", "master", "0", "node-1", int32(0))
	f.Add("logs", "es-0", "elasticsearch", "es", "data", "", "", int32(-5))
	f.Add("", "", "", "", "", "", "", int32(2000000000))
	f.Add("a/b", "\x00", "redis", "\u00e9", "slave", "x y", "node/1", int32(7))
	f.Fuzz(func(t *testing.T, ns, name, app, instance, component, shard, node string, prio int32) {
		labels := map[string]string{
			nameLabel:      app,
			instanceLabel:  instance,
			componentLabel: component,
			shardLabel:     shard,
			eckCluster:     instance,
			eckData:        component,
		}
		pod := &model.Pod{Namespace: ns, Name: name, UID: "pending", Labels: model.NewLabels(labels), Priority: prio}
		peer := &model.Pod{Namespace: ns, Name: name + "-peer", UID: "peer", Labels: model.NewLabels(labels), Priority: prio, Node: node}
		ctx := context.Background()
		if _, err := p.PeerKeys(ctx, pod); err != nil {
			t.Fatalf("PeerKeys: %v", err)
		}
		in := &Input{Pod: pod, Peers: []*model.Pod{peer}, Nodes: map[string]map[string]string{node: {"topology.kubernetes.io/zone": shard}}}
		cs, ps, err := p.Join(ctx, in)
		if err != nil {
			t.Fatalf("Judge: %v", err)
		}
		hard, err := p.Conflicts(ctx, in)
		if err != nil {
			t.Fatalf("Conflicts: %v", err)
		}
		if diff := gocmp.Diff(cs, hard); diff != "" {
			t.Errorf("Conflicts() and Judge() differ (-judge +conflicts):\n%s", diff)
		}
		// Claims kept with the pods, as in a request, only save work.
		dcs, dps, err := p.Join(ctx, described(t, p, in))
		if err != nil {
			t.Fatalf("Judge of described pods: %v", err)
		}
		if diff := gocmp.Diff(judged{cs, ps}, judged{dcs, dps}); diff != "" {
			t.Errorf("Judge() of described pods differs (-labels +described):\n%s", diff)
		}
		if _, err := p.Protected(ctx, peer); err != nil {
			t.Fatalf("Protected: %v", err)
		}
	})
}
