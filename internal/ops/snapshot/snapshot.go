// Package snapshot loads a cluster snapshot, the nodes, pods and
// StatefulSets that `kubectl get nodes,pods,statefulsets -A -o yaml` (or
// -o json) prints, or a multi-document YAML stream of them, and serves it
// as a read-only kubernetes.Interface, so that `regosched audit` and
// `explain` run their normal code paths with no cluster (`--snapshot`).
// StatefulSets are optional: they give a quorum's group its size (their
// replicas), which the pods alone would only count.
package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Default limits: a snapshot of a large cluster (5,000 nodes, 150,000 pods
// of about 4 KiB each as kubectl prints them) fits in them.
const (
	DefaultMaxBytes int64 = 1 << 30
	DefaultMaxItems       = 200_000
)

// Limits bound what Load reads; zero fields take the defaults.
type Limits struct {
	// MaxBytes bounds the file's size.
	MaxBytes int64
	// MaxItems bounds the number of nodes, pods and StatefulSets together.
	MaxItems int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultMaxItems
	}
	return l
}

// Snapshot is a cluster's nodes, pods and StatefulSets at one moment, as
// read from a file.
type Snapshot struct {
	// Source names the file, for messages.
	Source string
	Nodes  []*corev1.Node
	// Bound are the pods that occupy a node: bound and not finished.
	Bound []*corev1.Pod
	// Pending are the pods no node has yet, not finished.
	Pending []*corev1.Pod
	// Finished are the pods that succeeded or failed, which occupy no node.
	Finished []*corev1.Pod
	// StatefulSets are read for their replicas: the size of a quorum's
	// group whose members they hold, whether or not all are running.
	StatefulSets []*appsv1.StatefulSet
}

// Pods are all the snapshot's pods: bound, pending, then finished.
func (s *Snapshot) Pods() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(s.Bound)+len(s.Pending)+len(s.Finished))
	out = append(out, s.Bound...)
	out = append(out, s.Pending...)
	return append(out, s.Finished...)
}

// Pod is the snapshot's pod namespace/name, or nil.
func (s *Snapshot) Pod(namespace, name string) *corev1.Pod {
	for _, p := range s.Pods() {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	return nil
}

// StatefulSet is the snapshot's StatefulSet namespace/name, or nil.
func (s *Snapshot) StatefulSet(namespace, name string) *appsv1.StatefulSet {
	for _, set := range s.StatefulSets {
		if set.Namespace == namespace && set.Name == name {
			return set
		}
	}
	return nil
}

// LoadFile reads the snapshot at path, a regular file, refusing it past
// limits before it reads it whole.
func LoadFile(path string, limits Limits) (*Snapshot, error) {
	limits = limits.withDefaults()
	data, err := ReadRegular("snapshot", path, limits.MaxBytes)
	if err != nil {
		return nil, err
	}
	return Load(bytes.NewReader(data), path, limits)
}

// Load reads a snapshot from r, which source names in errors: a v1 List
// (or NodeList, PodList, or an apps/v1 StatefulSetList) of Nodes, Pods and
// StatefulSets in YAML or JSON, or a stream of YAML documents each one of
// them or such a List.
func Load(r io.Reader, source string, limits Limits) (*Snapshot, error) {
	limits = limits.withDefaults()
	// One byte past the limit tells a file at the limit from a longer one
	// (a pipe or a file that grew since Stat).
	data, err := io.ReadAll(io.LimitReader(r, limits.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", source, err)
	}
	if int64(len(data)) > limits.MaxBytes {
		return nil, fmt.Errorf("snapshot %s: %w of %d bytes", source, ErrTooLarge, limits.MaxBytes)
	}
	l := loader{snap: &Snapshot{Source: source}, limits: limits, nodes: map[string]bool{}, pods: map[string]bool{}, sets: map[string]bool{}}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 0; ; doc++ {
		raw, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: document %d: %w", source, doc, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		if err := l.document(raw); err != nil {
			return nil, fmt.Errorf("snapshot %s: document %d: %w", source, doc, err)
		}
	}
	if l.items == 0 {
		return nil, fmt.Errorf("snapshot %s: no nodes and no pods", source)
	}
	return l.snap, nil
}

// loader accumulates the items of a snapshot's documents.
type loader struct {
	snap   *Snapshot
	limits Limits
	// items counts the items so far, across documents, for MaxItems and
	// the index in errors.
	items             int
	nodes, pods, sets map[string]bool
}

// header is what an object or a list says it is.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// document adds one YAML or JSON document: an object or a list of them.
func (l *loader) document(raw []byte) error {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return fmt.Errorf("not YAML or JSON: %w", err)
	}
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return fmt.Errorf("not an object: %w", err)
	}
	switch h.Kind {
	case "List", "NodeList", "PodList":
		if h.APIVersion != "v1" {
			return fmt.Errorf("kind %s of apiVersion %q, want v1", h.Kind, h.APIVersion)
		}
		return l.list(js)
	case "StatefulSetList":
		if h.APIVersion != "apps/v1" {
			return fmt.Errorf("kind %s of apiVersion %q, want apps/v1", h.Kind, h.APIVersion)
		}
		return l.list(js)
	}
	return l.item(js, l.items)
}

// list adds a list's items, counting them as it goes so that a huge list
// is refused at the limit rather than held whole.
func (l *loader) list(js []byte) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if tok != "items" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		if t, err := dec.Token(); err != nil {
			return err
		} else if t == nil { // items: null
			continue
		} else if t != json.Delim('[') {
			return fmt.Errorf("items is not a list")
		}
		for dec.More() {
			var item json.RawMessage
			if err := dec.Decode(&item); err != nil {
				return fmt.Errorf("item %d: %w", l.items, err)
			}
			if err := l.item(item, l.items); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ]
			return err
		}
	}
	return nil
}

// item adds one Node, Pod or StatefulSet; index is its place among the
// file's items.
func (l *loader) item(js []byte, index int) error {
	if l.items >= l.limits.MaxItems {
		return fmt.Errorf("item %d: more than the limit of %d items", index, l.limits.MaxItems)
	}
	l.items++
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return fmt.Errorf("item %d: not an object: %w", index, err)
	}
	switch {
	case h.APIVersion == "v1" && h.Kind == "Node":
		return l.node(js, index)
	case h.APIVersion == "v1" && h.Kind == "Pod":
		return l.pod(js, index)
	case h.APIVersion == "apps/v1" && h.Kind == "StatefulSet":
		return l.statefulSet(js, index)
	}
	return fmt.Errorf("item %d: kind %q of apiVersion %q: a snapshot holds only v1 Nodes and Pods and apps/v1 StatefulSets", index, h.Kind, h.APIVersion)
}

// node adds a Node; a name given twice would make two nodes of one.
func (l *loader) node(js []byte, index int) error {
	var n corev1.Node
	if err := json.Unmarshal(js, &n); err != nil {
		return fmt.Errorf("item %d: Node: %w", index, err)
	}
	switch {
	case n.Name == "":
		return fmt.Errorf("item %d: Node without a name", index)
	case l.nodes[n.Name]:
		return fmt.Errorf("item %d: Node %s twice", index, n.Name)
	}
	l.nodes[n.Name] = true
	l.snap.Nodes = append(l.snap.Nodes, &n)
	return nil
}

// pod adds a Pod to the bound, pending or finished ones by its node and
// phase, since only bound, unfinished pods occupy a node.
func (l *loader) pod(js []byte, index int) error {
	var p corev1.Pod
	if err := json.Unmarshal(js, &p); err != nil {
		return fmt.Errorf("item %d: Pod: %w", index, err)
	}
	if p.Name == "" {
		return fmt.Errorf("item %d: Pod without a name", index)
	}
	if p.Namespace == "" {
		p.Namespace = "default" // as kubectl apply would put it
	}
	key := p.Namespace + "/" + p.Name
	if l.pods[key] {
		return fmt.Errorf("item %d: Pod %s twice", index, key)
	}
	l.pods[key] = true
	if p.UID == "" {
		// The placement cache tells pods apart by UID; a hand-written
		// snapshot's pods get one each, stable across loads.
		p.UID = types.UID("snapshot:" + key)
	}
	switch {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		l.snap.Finished = append(l.snap.Finished, &p)
	case p.Spec.NodeName != "":
		l.snap.Bound = append(l.snap.Bound, &p)
	default:
		l.snap.Pending = append(l.snap.Pending, &p)
	}
	return nil
}

// statefulSet adds a StatefulSet, whose replicas size the quorum of the
// pods it controls (model.Pod.StatefulSet names it).
func (l *loader) statefulSet(js []byte, index int) error {
	var s appsv1.StatefulSet
	if err := json.Unmarshal(js, &s); err != nil {
		return fmt.Errorf("item %d: StatefulSet: %w", index, err)
	}
	if s.Name == "" {
		return fmt.Errorf("item %d: StatefulSet without a name", index)
	}
	if s.Namespace == "" {
		s.Namespace = "default" // as for pods, whose owner it is by name
	}
	key := s.Namespace + "/" + s.Name
	switch {
	case l.sets[key]:
		return fmt.Errorf("item %d: StatefulSet %s twice", index, key)
	case s.Spec.Replicas != nil && *s.Spec.Replicas < 0:
		// The API server refuses it; as a group's size it would mean nothing.
		return fmt.Errorf("item %d: StatefulSet %s: spec.replicas %d, want 0 or more", index, key, *s.Spec.Replicas)
	}
	l.sets[key] = true
	l.snap.StatefulSets = append(l.snap.StatefulSets, &s)
	return nil
}

// stripComments drops comment lines, so that a document of comments alone
// counts as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range strings.SplitSeq(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}
