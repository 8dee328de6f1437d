// Package verify runs policy test suites offline (`regosched verify`), as
// Gatekeeper's `gator verify` and `kyverno test` do for theirs: a suite
// names a cluster snapshot (nodes, bound pods and the StatefulSets that
// size quorums) and pending pods, and says per pod which nodes the policy
// allows and which it denies, by which rule and peer, in which order it
// scores them, and which violations and unprotected pods an audit of the
// snapshot finds.
//
// Each pod is judged by internal/ops/explain, the real placement cache and the
// extender's decision code over the one judge, on a snapshot served as a
// read-only client: the verdicts are the running extender's, not a copy's.
package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/ops/snapshot"
)

// Kind and APIVersion identify a suite file; other YAML files in a
// directory given to verify (snapshots, bundles' data) are skipped.
const (
	APIVersion = "regosched.io/v1alpha1"
	Kind       = "Suite"
)

// MaxSuiteBytes bounds a suite file: inline objects of a few hundred pods
// fit, and a file that is not a suite is refused before it is parsed.
const MaxSuiteBytes = 16 << 20

// Suite is one suite file.
type Suite struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	// Snapshot is a file of nodes, pods and optionally StatefulSets
	// (kubectl get nodes,pods,statefulsets -A -o yaml), relative to the
	// suite's directory and within its tree unless
	// Options.AllowOutsideSuite.
	Snapshot string `json:"snapshot,omitempty"`
	// Objects are nodes, pods and StatefulSets inline, added to the
	// snapshot's; a StatefulSet sizes the quorum of the pods it controls.
	Objects []json.RawMessage `json:"objects,omitempty"`
	// Cases are pending pods and what the policy must decide for them.
	Cases []Case `json:"cases,omitempty"`
	// Audit is what an audit of the snapshot's bound pods must find.
	Audit *AuditExpect `json:"audit,omitempty"`

	// path is the file the suite was read from.
	path string
}

// Metadata names a suite.
type Metadata struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Case is one pod to place and what the policy must decide for it.
type Case struct {
	Name string `json:"name"`
	// Pod names a pod of the snapshot, "namespace/name" (or "name" in
	// "default"); Object is a pod manifest instead, not in the snapshot.
	Pod    string          `json:"pod,omitempty"`
	Object json.RawMessage `json:"object,omitempty"`
	Expect Expect          `json:"expect"`
}

// Expect is what a case expects; a check left out is not made.
type Expect struct {
	// Allowed are nodes filter must keep.
	Allowed []string `json:"allowed,omitempty"`
	// Denied are nodes filter must remove, each by a rule and a peer when
	// they are given; a node denied by two rules may be listed twice.
	Denied []Denial `json:"denied,omitempty"`
	// Others is the verdict of every node the case does not list: allowed
	// or denied; empty checks nothing of them.
	Others string `json:"others,omitempty"`
	// ScoreOrder lists nodes from the best score to the worst: each entry
	// is a node, or a list of nodes that score the same.
	ScoreOrder []NodeGroup `json:"scoreOrder,omitempty"`
	// PeerKeys are the pod's groups, exactly; [] expects none.
	PeerKeys *[]string `json:"peerKeys,omitempty"`
	// Unprotected are the reasons the policy gives for not protecting the
	// pod, exactly (e.g. role_unknown); [] expects it protected.
	Unprotected *[]string `json:"unprotected,omitempty"`
}

// Verdicts of Others.
const (
	VerdictAllowed = "allowed"
	VerdictDenied  = "denied"
)

// Denial is a node the pod must be denied.
type Denial struct {
	Node string `json:"node"`
	// Rule, when set, must be among the rules that deny the node.
	Rule string `json:"rule,omitempty"`
	// Peer, when set, is the peer (namespace/name) that rule denies the
	// node for.
	Peer string `json:"peer,omitempty"`
	// Resolvable, when set, says whether preemption may resolve the node
	// (the extender's FailedNodes) or not (FailedAndUnresolvableNodes).
	Resolvable *bool `json:"resolvable,omitempty"`
}

// NodeGroup is one rank of a score order: nodes that score the same.
type NodeGroup []string

// UnmarshalJSON takes a node name or a list of them.
func (g *NodeGroup) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*g = NodeGroup{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("a score order entry is a node name or a list of node names")
	}
	if len(many) == 0 {
		return errors.New("a score order entry lists no node")
	}
	*g = many
	return nil
}

// MarshalJSON writes a single node as a string.
func (g NodeGroup) MarshalJSON() ([]byte, error) {
	if len(g) == 1 {
		return json.Marshal(g[0])
	}
	return json.Marshal([]string(g))
}

// AuditExpect is what an audit of the snapshot must find.
type AuditExpect struct {
	// Violations are the hard rules broken between bound pods, exactly:
	// [] expects none.
	Violations *[]Violation `json:"violations,omitempty"`
	// Unprotected are pods of the snapshot and the reasons the policy
	// gives for not protecting each, exactly ([] for a protected pod);
	// pods not listed are not checked.
	Unprotected []UnprotectedPod `json:"unprotected,omitempty"`
}

// Violation is a hard rule broken between two pods on one node.
type Violation struct {
	Rule string `json:"rule"`
	Node string `json:"node"`
	// Pods are the two pods, namespace/name, in any order.
	Pods []string `json:"pods"`
}

// UnprotectedPod is a pod and the reasons it is not protected.
type UnprotectedPod struct {
	Pod     string   `json:"pod"`
	Reasons []string `json:"reasons"`
}

// Name is the suite's name, else its file's.
func (s *Suite) Name() string {
	if s.Metadata.Name != "" {
		return s.Metadata.Name
	}
	return strings.TrimSuffix(filepath.Base(s.path), filepath.Ext(s.path))
}

// Path is the file the suite was read from.
func (s *Suite) Path() string { return s.path }

// Discover returns the suites of paths: a file is a suite (and an error if
// it is not one); a directory's *.yaml and *.yml files, recursively, are the
// suites among them, in lexical order, and the rest is skipped.
func Discover(paths []string) ([]*Suite, error) {
	var out []*Suite
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("suite: %w", err)
		}
		if !info.IsDir() {
			s, err := LoadFile(p)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			continue
		}
		var found int
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !isYAML(path) {
				return nil
			}
			data, err := readBounded(path)
			if err != nil {
				return err
			}
			if !isSuite(data) {
				return nil
			}
			s, err := parse(data, path)
			if err != nil {
				return err
			}
			out = append(out, s)
			found++
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("suites in %s: %w", p, err)
		}
		if found == 0 {
			return nil, fmt.Errorf("suites in %s: no file of kind %s (apiVersion %s)", p, Kind, APIVersion)
		}
	}
	return out, nil
}

func isYAML(path string) bool {
	ext := filepath.Ext(path)
	return ext == ".yaml" || ext == ".yml"
}

// LoadFile reads the suite at path.
func LoadFile(path string) (*Suite, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	return parse(data, path)
}

// readBounded reads path, a regular file, refusing it past MaxSuiteBytes
// before reading it all.
func readBounded(path string) ([]byte, error) {
	return snapshot.ReadRegular("suite", path, MaxSuiteBytes)
}

// isSuite tells a suite from the other YAML files of a directory by its
// kind, without parsing the rest.
func isSuite(data []byte) bool {
	var h struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	// A multi-document file (a snapshot stream) is not a suite: only its
	// first document is looked at, and a suite is one document.
	first, _, _ := bytes.Cut(data, []byte("\n---"))
	if err := yaml.Unmarshal(first, &h); err != nil {
		return false
	}
	return h.APIVersion == APIVersion && h.Kind == Kind
}

// parse decodes and checks a suite, refusing unknown fields: a misspelt
// expectation would otherwise check nothing and pass.
func parse(data []byte, path string) (*Suite, error) {
	s := &Suite{path: path}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, fmt.Errorf("suite %s: %w", path, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("suite %s: %w", path, err)
	}
	return s, nil
}

// validate checks what decoding cannot.
func (s *Suite) validate() error {
	if s.APIVersion != APIVersion || s.Kind != Kind {
		return fmt.Errorf("apiVersion %q, kind %q: want %s, %s", s.APIVersion, s.Kind, APIVersion, Kind)
	}
	if s.Snapshot == "" && len(s.Objects) == 0 {
		return errors.New("no snapshot and no objects: the suite has no cluster")
	}
	if len(s.Cases) == 0 && s.Audit == nil {
		return errors.New("no cases and no audit: the suite expects nothing")
	}
	names := map[string]bool{}
	for i, c := range s.Cases {
		where := fmt.Sprintf("cases[%d]", i)
		if c.Name == "" {
			return fmt.Errorf("%s: no name", where)
		}
		where = fmt.Sprintf("case %q", c.Name)
		if names[c.Name] {
			return fmt.Errorf("%s: named twice", where)
		}
		names[c.Name] = true
		if (c.Pod == "") == (len(c.Object) == 0) {
			return fmt.Errorf("%s: give pod (a pod of the snapshot) or object (a pod manifest), one of them", where)
		}
		if err := c.Expect.validate(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	if a := s.Audit; a != nil {
		if a.Violations == nil && len(a.Unprotected) == 0 {
			return errors.New("audit: expects nothing (violations, unprotected)")
		}
		if a.Violations != nil {
			for i, v := range *a.Violations {
				if v.Rule == "" || v.Node == "" || len(v.Pods) != 2 {
					return fmt.Errorf("audit.violations[%d]: want rule, node and two pods", i)
				}
			}
		}
		for i, u := range a.Unprotected {
			if u.Pod == "" {
				return fmt.Errorf("audit.unprotected[%d]: no pod", i)
			}
		}
	}
	return nil
}

func (e *Expect) validate() error {
	if len(e.Allowed) == 0 && len(e.Denied) == 0 && e.Others == "" && len(e.ScoreOrder) == 0 &&
		e.PeerKeys == nil && e.Unprotected == nil {
		return errors.New("expect: nothing (allowed, denied, others, scoreOrder, peerKeys, unprotected)")
	}
	switch e.Others {
	case "", VerdictAllowed, VerdictDenied:
	default:
		return fmt.Errorf("expect.others %q: want %s or %s", e.Others, VerdictAllowed, VerdictDenied)
	}
	seen := map[string]string{}
	for _, n := range e.Allowed {
		if n == "" {
			return errors.New("expect.allowed: an empty node name")
		}
		seen[n] = VerdictAllowed
	}
	for i, d := range e.Denied {
		if d.Node == "" {
			return fmt.Errorf("expect.denied[%d]: no node", i)
		}
		if d.Peer != "" && d.Rule == "" {
			return fmt.Errorf("expect.denied[%d]: a peer without its rule", i)
		}
		if seen[d.Node] == VerdictAllowed {
			return fmt.Errorf("expect: node %s both allowed and denied", d.Node)
		}
		seen[d.Node] = VerdictDenied
	}
	var ranked []string
	for _, g := range e.ScoreOrder {
		for _, n := range g {
			if seen[n] == VerdictDenied {
				return fmt.Errorf("expect.scoreOrder: node %s is expected denied, and a denied node has no score", n)
			}
			if slices.Contains(ranked, n) {
				return fmt.Errorf("expect.scoreOrder: node %s ranked twice", n)
			}
			ranked = append(ranked, n)
		}
	}
	return nil
}
