package snapshot

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "github.com/regosched/regosched/test/fixture"
)

// summary is what a test compares of a snapshot: its objects' names, and
// StatefulSets' replicas ("ns/name=3", "=nil" when unset).
type summary struct {
	Nodes, Bound, Pending, Finished, StatefulSets []string
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
	for _, set := range s.StatefulSets {
		replicas := "nil"
		if set.Spec.Replicas != nil {
			replicas = fmt.Sprint(*set.Spec.Replicas)
		}
		out.StatefulSets = append(out.StatefulSets, set.Namespace+"/"+set.Name+"="+replicas)
	}
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

// statefulSet is fx.StatefulSet namespace/name of Elasticsearch
// masters as kubectl prints it: JSON, which is a YAML document too.
func statefulSet(namespace, name string, replicas int32) string {
	set := fx.StatefulSet(namespace, name, replicas, fx.ElasticsearchLabels("logs", "master"))
	set.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
	js, err := json.Marshal(set)
	if err != nil {
		panic(err) // a typed object always marshals
	}
	return string(js)
}

// setItem is statefulSet as an item of list.
func setItem(namespace, name string, replicas int32) string {
	return "- " + statefulSet(namespace, name, replicas) + "\n"
}

func TestLoad(t *testing.T) {
	many := make([]string, 11)
	for i := range many {
		many[i] = item("Pod", fmt.Sprintf("p%d", i))
	}
	// Ten pods and a StatefulSet: the StatefulSet is the eleventh item.
	manySets := slices.Concat(many[:10], []string{setItem("ns", "s", 3)})
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
			wantErr: `snapshot f: document 0: item 1: kind "ConfigMap" of apiVersion "v1": a snapshot holds only v1 Nodes and Pods and apps/v1 StatefulSets`},
		{name: "wrong apiVersion", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
			wantErr: `snapshot f: document 0: item 0: kind "Deployment" of apiVersion "apps/v1": a snapshot holds only v1 Nodes and Pods and apps/v1 StatefulSets`},
		{name: "no kind", in: "metadata: {name: x}\n",
			wantErr: `snapshot f: document 0: item 0: kind "" of apiVersion "": a snapshot holds only v1 Nodes and Pods and apps/v1 StatefulSets`},
		// kubectl get nodes,pods,statefulsets -A -o yaml: one List of all three.
		{name: "StatefulSets in a list", in: list(item("Node", "n1"), setItem("logs", "es-master", 3), item("Pod", "p")),
			want: summary{Nodes: []string{"n1"}, Pending: []string{"ns/p@"}, StatefulSets: []string{"logs/es-master=3"}}},
		{name: "StatefulSets in a stream", in: "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n" + statefulSet("logs", "es-master", 3) +
			"\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: es-data}\nspec: {serviceName: es}\n",
			want: summary{Nodes: []string{"n1"}, StatefulSets: []string{"logs/es-master=3", "default/es-data=nil"}}},
		{name: "a StatefulSetList", in: "apiVersion: apps/v1\nkind: StatefulSetList\nitems:\n" + setItem("logs", "es-master", 5),
			want: summary{StatefulSets: []string{"logs/es-master=5"}}},
		{name: "a StatefulSetList of another apiVersion", in: "apiVersion: v1\nkind: StatefulSetList\nitems: []\n",
			wantErr: `snapshot f: document 0: kind StatefulSetList of apiVersion "v1", want apps/v1`},
		{name: "a StatefulSet of another apiVersion", in: list("- {apiVersion: apps/v1beta1, kind: StatefulSet, metadata: {name: s}}\n"),
			wantErr: `snapshot f: document 0: item 0: kind "StatefulSet" of apiVersion "apps/v1beta1": a snapshot holds only v1 Nodes and Pods and apps/v1 StatefulSets`},
		{name: "StatefulSets count toward the item limit", in: list(manySets...), limits: Limits{MaxItems: 10},
			wantErr: "snapshot f: document 0: item 10: more than the limit of 10 items"},
		{name: "a malformed StatefulSet", in: list(item("Node", "n1"), "- {apiVersion: apps/v1, kind: StatefulSet, metadata: {name: s}, spec: {replicas: three}}\n"),
			wantErr: "snapshot f: document 0: item 1: StatefulSet: json: cannot unmarshal string into Go struct field StatefulSetSpec.spec.replicas of type int32"},
		{name: "an unnamed StatefulSet", in: list("- {apiVersion: apps/v1, kind: StatefulSet, metadata: {namespace: ns}}\n"),
			wantErr: "snapshot f: document 0: item 0: StatefulSet without a name"},
		{name: "a StatefulSet twice", in: list(setItem("logs", "s", 3), item("Pod", "p"), setItem("logs", "s", 1)),
			wantErr: "snapshot f: document 0: item 2: StatefulSet logs/s twice"},
		{name: "a StatefulSet of negative replicas", in: list(setItem("logs", "s", -1)),
			wantErr: "snapshot f: document 0: item 0: StatefulSet logs/s: spec.replicas -1, want 0 or more"},
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
