package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// summary is what a test compares of a snapshot: its objects' names.
type summary struct {
	Nodes, Bound, Pending, Finished []string
}

func summarize(s *Snapshot) summary {
	var out summary
	for _, n := range s.Nodes {
		out.Nodes = append(out.Nodes, n.Name)
	}
	keys := func(pods []*corev1.Pod) []string {
		var k []string
		for _, p := range pods {
			k = append(k, p.Namespace+"/"+p.Name+"@"+p.Spec.NodeName)
		}
		return k
	}
	out.Bound, out.Pending, out.Finished = keys(s.Bound), keys(s.Pending), keys(s.Finished)
	return out
}

// fixture is testdata/snapshots/cluster.*'s content, in each of its forms.
var fixture = summary{
	Nodes: []string{"node-a", "node-b", "node-c"},
	Bound: []string{
		"shop/cache-redis-master-0@node-a", "shop/cache-redis-replicas-0@node-b", "shop/cache-redis-replicas-1@node-c",
		"search/logs-elasticsearch-master-0@node-a", "search/logs-elasticsearch-data-0@node-b", "search/logs-elasticsearch-data-1@node-c",
	},
	Pending:  []string{"search/logs-elasticsearch-data-2@"},
	Finished: []string{"search/logs-elasticsearch-data-3@node-b"},
}

func TestLoadFileFixtures(t *testing.T) {
	for _, name := range []string{"cluster.yaml", "cluster.json", "stream.yaml"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "..", "..", "testdata", "snapshots", name)
			s, err := LoadFile(path, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fixture, summarize(s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if s.Source != path {
				t.Errorf("Source %q, want %q", s.Source, path)
			}
			master := s.Pod("shop", "cache-redis-master-0")
			if master == nil {
				t.Fatal("no shop/cache-redis-master-0")
			}
			if got := master.Labels["app.kubernetes.io/component"]; got != "master" {
				t.Errorf("component label %q, want master", got)
			}
			if got := s.Nodes[1].Labels["topology.kubernetes.io/zone"]; got != "eu-west-1b" {
				t.Errorf("node-b's zone %q, want eu-west-1b", got)
			}
		})
	}
}

// item is a minimal kubectl-shaped item of kind in YAML, for a list.
func item(kind, name string) string {
	return fmt.Sprintf("- apiVersion: v1\n  kind: %s\n  metadata:\n    name: %s\n    namespace: ns\n", kind, name)
}

func list(items ...string) string {
	return "apiVersion: v1\nkind: List\nitems:\n" + strings.Join(items, "")
}

func TestLoad(t *testing.T) {
	many := make([]string, 11)
	for i := range many {
		many[i] = item("Pod", fmt.Sprintf("p%d", i))
	}
	for _, tc := range []struct {
		name, in string
		limits   Limits
		want     summary
		wantErr  string
	}{
		{name: "list", in: list(item("Node", "n1"), item("Pod", "p")),
			want: summary{Nodes: []string{"n1"}, Pending: []string{"ns/p@"}}},
		{name: "pod without namespace is in default", in: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: n1}\n",
			want: summary{Bound: []string{"default/p@n1"}}},
		{name: "stream with comments and empty documents", in: "# header\n---\n---\n" + "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n# only a comment\n",
			want: summary{Nodes: []string{"n1"}}},
		{name: "JSON list", in: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}],"metadata":{"resourceVersion":""}}`,
			want: summary{Nodes: []string{"n1"}}},
		{name: "items null", in: "apiVersion: v1\nkind: List\nitems: null\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
			want: summary{Nodes: []string{"n1"}}},
		{name: "empty", in: "", wantErr: "snapshot f: no nodes and no pods"},
		{name: "empty list", in: "apiVersion: v1\nkind: List\nitems: []\n", wantErr: "snapshot f: no nodes and no pods"},
		{name: "oversized", in: list(item("Node", "n1")), limits: Limits{MaxBytes: 20},
			wantErr: "snapshot f: more than the limit of 20 bytes"},
		{name: "too many items", in: list(many...), limits: Limits{MaxItems: 10},
			wantErr: "snapshot f: document 0: item 10: more than the limit of 10 items"},
		{name: "too many items across documents", in: "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n2}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n3}\n", limits: Limits{MaxItems: 2},
			wantErr: "snapshot f: document 2: item 2: more than the limit of 2 items"},
		{name: "wrong kind", in: list(item("Node", "n1"), item("ConfigMap", "c")),
			wantErr: `snapshot f: document 0: item 1: kind "ConfigMap" of apiVersion "v1": a snapshot holds only v1 Nodes and Pods`},
		{name: "wrong apiVersion", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
			wantErr: `snapshot f: document 0: item 0: kind "Deployment" of apiVersion "apps/v1": a snapshot holds only v1 Nodes and Pods`},
		{name: "no kind", in: "metadata: {name: x}\n",
			wantErr: `snapshot f: document 0: item 0: kind "" of apiVersion "": a snapshot holds only v1 Nodes and Pods`},
		{name: "list of another apiVersion", in: "apiVersion: v2\nkind: List\nitems: []\n",
			wantErr: `snapshot f: document 0: kind List of apiVersion "v2", want v1`},
		{name: "malformed YAML", in: "apiVersion: v1\nkind: List\nitems: [\n",
			wantErr: "snapshot f: document 0: not YAML or JSON: yaml: line 3: did not find expected node content"},
		{name: "not an object", in: "- a\n- b\n",
			wantErr: "snapshot f: document 0: not an object: json: cannot unmarshal array into Go value of type snapshot.header"},
		{name: "items not a list", in: "apiVersion: v1\nkind: List\nitems: {a: 1}\n",
			wantErr: "snapshot f: document 0: items is not a list"},
		{name: "bad field", in: list(item("Node", "n1"), "- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec: {nodeName: [1]}\n"),
			wantErr: "snapshot f: document 0: item 1: Pod: json: cannot unmarshal array into Go struct field PodSpec.spec.nodeName of type string"},
		{name: "duplicate node", in: list(item("Node", "n1"), item("Pod", "p"), item("Node", "n1")),
			wantErr: "snapshot f: document 0: item 2: Node n1 twice"},
		{name: "duplicate pod", in: list(item("Pod", "p"), item("Pod", "p")),
			wantErr: "snapshot f: document 0: item 1: Pod ns/p twice"},
		{name: "unnamed node", in: "apiVersion: v1\nkind: Node\nmetadata: {}\n",
			wantErr: "snapshot f: document 0: item 0: Node without a name"},
		{name: "unnamed pod", in: "apiVersion: v1\nkind: Pod\n",
			wantErr: "snapshot f: document 0: item 0: Pod without a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(strings.NewReader(tc.in), "f", tc.limits)
			var gotErr string
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, summarize(s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadFileSizeBeforeRead shows that a file past the limit is refused
// from its size, before it is read, and that the error names the file.
func TestLoadFileSizeBeforeRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the file claims 1 GiB and more, without the disk.
	if err := f.Truncate(DefaultMaxBytes + 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFile(path, Limits{})
	want := fmt.Sprintf("snapshot %s: %d bytes, more than the limit of %d", path, DefaultMaxBytes+1, DefaultMaxBytes)
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestLoadUIDs shows that pods without a UID get distinct, stable ones,
// since the placement cache tells pods apart by UID.
func TestLoadUIDs(t *testing.T) {
	in := list(item("Pod", "a"), item("Pod", "b"), "- apiVersion: v1\n  kind: Pod\n  metadata: {name: c, namespace: ns, uid: u-c}\n")
	s, err := Load(strings.NewReader(in), "f", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.Pods() {
		got = append(got, string(p.UID))
	}
	if diff := cmp.Diff([]string{"snapshot:ns/a", "snapshot:ns/b", "u-c"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
