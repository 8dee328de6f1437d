package policy

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// skipTests is the loader filter that leaves *_test.rego modules out, as
// internal/core/bundles does before Compile (which these tests cannot import).
func skipTests(abspath string, info fs.FileInfo, _ int) bool {
	return !info.IsDir() && IsTest(abspath)
}

// readBundle reads a bundle with OPA's loader, its tests left out unless
// withTests.
func readBundle(loader bundle.DirectoryLoader, withTests bool) (*bundle.Bundle, error) {
	if !withTests {
		loader = loader.WithFilter(skipTests)
	}
	b, err := bundle.NewCustomReader(loader).Read()
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle: %w", err)
	}
	return &b, nil
}

// readFS reads the bundle at the root of fsys, its tests left out unless
// withTests.
func readFS(tb testing.TB, fsys fs.FS, withTests bool) *bundle.Bundle {
	tb.Helper()
	loader, err := bundle.NewFSLoader(fsys)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := readBundle(loader, withTests)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// compileDir reads the bundle directory dir without its tests and compiles
// it, as internal/core/bundles loads one: a syntax error fails the reading.
func compileDir(dir string) (*Policy, error) {
	b, err := readBundle(bundle.NewDirectoryLoader(dir), false)
	if err != nil {
		return nil, err
	}
	return Compile(context.Background(), b)
}

// compileFS reads the bundle at the root of fsys without its tests and
// compiles it, failing tb if it is refused.
func compileFS(tb testing.TB, fsys fs.FS) *Policy {
	tb.Helper()
	p, err := Compile(context.Background(), readFS(tb, fsys, false))
	if err != nil {
		tb.Fatalf("Compile() error = %v", err)
	}
	return p
}

// defaultPolicy compiles the embedded default bundle once for all tests: a
// Policy is immutable and safe for concurrent use.
var defaultPolicy = sync.OnceValues(func() (*Policy, error) {
	loader, err := bundle.NewFSLoader(regosched.DefaultPolicy())
	if err != nil {
		return nil, err
	}
	b, err := readBundle(loader, false)
	if err != nil {
		return nil, err
	}
	return Compile(context.Background(), b)
})

func mustDefaultPolicy(tb testing.TB) *Policy {
	tb.Helper()
	p, err := defaultPolicy()
	if err != nil {
		tb.Fatalf("compiling the default policy: %v", err)
	}
	return p
}

// minimal is a small valid policy bundle without a manifest: pods are
// grouped by their label app, and two pods of one app keep off each
// other's node.
func minimal() fstest.MapFS {
	return fstest.MapFS{
		"regosched/keys.rego": {Data: []byte(`package regosched

peer_keys contains input.pod.labels.app if input.pod.labels.app != ""
`)},
		"regosched/claims.rego": {Data: []byte(`package regosched.claims

marks[input.pod.labels.app] := "{pod} of the same app"

separate contains {"mark": input.pod.labels.app, "rule": "same-app"}

spread contains {"mark": input.pod.labels.app, "rule": "spread", "topology_key": "kubernetes.io/hostname"}
`)},
		"regosched/config/data.json": {Data: []byte(`{"weight": 1}`)},
	}
}

// with is minimal with the file name set to content.
func with(name, content string) fstest.MapFS {
	fsys := minimal()
	fsys[name] = &fstest.MapFile{Data: []byte(content)}
	return fsys
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

func eck(cluster, data string) map[string]string {
	return map[string]string{eckCluster: cluster, eckData: data}
}

// redisCluster is a pending replica of shard 0 and the six bound pods of a
// three-shard Redis cluster.
func redisCluster() *Input {
	in := &Input{
		Pod:   fixture.MakePod().Namespace("shop").Name("cache-0-replica-1").UID("pending").Redis("cache", "replica", "0").Model(),
		Nodes: map[string]map[string]string{},
	}
	for shard := range 3 {
		for i, role := range []string{"master", "replica"} {
			node := fmt.Sprintf("node-%d", shard*2+i)
			name := fmt.Sprintf("cache-%d-%s", shard, role)
			in.Peers = append(in.Peers, fixture.MakePod().Namespace("shop").Name(name).Redis("cache", role, fmt.Sprint(shard)).Node(node).Model())
			in.Nodes[node] = map[string]string{zoneLabel: fmt.Sprintf("zone-%d", i), hostnameLabel: node}
		}
	}
	return in
}

// described is in with each pod carrying the claims p describes it with
// (none for a pod in no group), as the placement cache hands over peers
// (marks only) and the decider the pending pod (what it avoids only).
func described(tb testing.TB, p *Policy, in *Input) *Input {
	tb.Helper()
	describe := func(pod *model.Pod, view func(context.Context, *model.Pod) ([]string, *model.Claims, error)) *model.Pod {
		c := *pod
		var err error
		if _, c.Claims, err = view(context.Background(), pod); err != nil {
			tb.Fatalf("describing %s: %v", pod.Key(), err)
		}
		return &c
	}
	out := &Input{Pod: describe(in.Pod, p.DescribePending), Nodes: in.Nodes, Domains: in.Domains, Replicas: in.Replicas}
	for _, peer := range in.Peers {
		out.Peers = append(out.Peers, describe(peer, p.DescribePeer))
	}
	return out
}

// onNode is the domain of a rule per node, on node.
func onNode(node string) model.Domain { return model.Domain{Key: model.HostnameKey, Value: node} }
