package verify

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/ops/explain"
)

// checkCase compares a case's expectations with what was decided for its
// pod; known are the snapshot's nodes, so that a misspelt node fails
// clearly instead of matching nothing.
func checkCase(e Expect, r *explain.Report, known map[string]bool) []Check {
	nodes := make(map[string]explain.NodeResult, len(r.Nodes))
	for _, n := range r.Nodes {
		nodes[n.Node] = n
	}
	var out []Check
	unknown := func(name, node string) bool {
		if known[node] {
			return false
		}
		out = append(out, Check{Name: name, Want: "node " + node + " in the snapshot", Got: "no such node"})
		return true
	}
	listed := map[string]bool{}
	for _, node := range e.Allowed {
		listed[node] = true
		name := node + " allowed"
		if unknown(name, node) {
			continue
		}
		out = append(out, Check{Name: name, Passed: nodes[node].Verdict == explain.OK, Want: VerdictAllowed, Got: describeNode(nodes[node])})
	}
	for _, d := range e.Denied {
		listed[d.Node] = true
		name := d.Node + " denied"
		if d.Rule != "" {
			name += " by " + d.Rule
		}
		if unknown(name, d.Node) {
			continue
		}
		out = append(out, checkDenial(name, d, nodes[d.Node]))
	}
	if e.Others != "" {
		out = append(out, checkOthers(e.Others, r.Nodes, listed))
	}
	if len(e.ScoreOrder) > 0 {
		out = append(out, checkScoreOrder(e.ScoreOrder, nodes, known))
	}
	if e.PeerKeys != nil {
		want, got := slices.Sorted(slices.Values(*e.PeerKeys)), slices.Sorted(slices.Values(r.PeerKeys))
		out = append(out, Check{Name: "peer keys", Passed: slices.Equal(want, got), Want: list(want), Got: list(got)})
	}
	if e.Unprotected != nil {
		out = append(out, checkUnprotected("unprotected", *e.Unprotected, r.Unprotected))
	}
	return out
}

// describeNode says what was decided on a node, for a check's Got.
func describeNode(n explain.NodeResult) string {
	switch n.Verdict {
	case explain.OK:
		if n.Score != nil {
			return fmt.Sprintf("allowed (score %d)", *n.Score)
		}
		return VerdictAllowed
	case explain.Failed, explain.Unresolvable:
		parts := make([]string, len(n.Denials))
		for i, d := range n.Denials {
			parts[i] = describeDenial(d.Rule, d.Peer)
		}
		what := "denied"
		if len(parts) > 0 {
			what += " by " + strings.Join(parts, ", ")
		}
		return fmt.Sprintf("%s (%s)", what, n.Verdict)
	}
	return "not judged"
}

func describeDenial(rule, peer string) string {
	if peer == "" {
		return rule
	}
	return rule + " (peer " + peer + ")"
}

// checkDenial: the node is denied, by d.Rule for d.Peer when given, and
// as resolvable or not when given.
func checkDenial(name string, d Denial, n explain.NodeResult) Check {
	want := "denied"
	if d.Rule != "" {
		want += " by " + describeDenial(d.Rule, d.Peer)
	}
	if d.Resolvable != nil {
		if *d.Resolvable {
			want += " (failed: preemption may help)"
		} else {
			want += " (unresolvable)"
		}
	}
	c := Check{Name: name, Want: want, Got: describeNode(n)}
	denied := n.Verdict == explain.Failed || n.Verdict == explain.Unresolvable
	byRule := d.Rule == "" || slices.ContainsFunc(n.Denials, func(x explain.Denial) bool {
		return x.Rule == d.Rule && (d.Peer == "" || x.Peer == d.Peer)
	})
	resolvable := d.Resolvable == nil || *d.Resolvable == (n.Verdict == explain.Failed)
	c.Passed = denied && byRule && resolvable
	return c
}

// checkOthers: every node the case does not list has the verdict others.
func checkOthers(others string, results []explain.NodeResult, listed map[string]bool) Check {
	c := Check{Name: "other nodes " + others, Want: "every node not listed " + others}
	var wrong []string
	for _, n := range results {
		if listed[n.Node] {
			continue
		}
		if (n.Verdict == explain.OK) != (others == VerdictAllowed) {
			wrong = append(wrong, n.Node+" "+describeNode(n))
		}
	}
	c.Passed = len(wrong) == 0
	c.Got = "so they are"
	if !c.Passed {
		c.Got = strings.Join(wrong, "; ")
	}
	return c
}

// checkScoreOrder: each rank's nodes are allowed and score the same, and
// more than the next rank's.
func checkScoreOrder(order []NodeGroup, nodes map[string]explain.NodeResult, known map[string]bool) Check {
	ranks := make([]string, len(order))
	for i, g := range order {
		ranks[i] = strings.Join(g, " = ")
	}
	c := Check{Name: "score order", Want: strings.Join(ranks, " > ")}
	var got []string
	ok := true
	prev := int64(-1)
	for i, g := range order {
		var scores []string
		var first int64 = -1
		for _, node := range g {
			n, have := nodes[node]
			switch {
			case !known[node]:
				scores = append(scores, node+" not in the snapshot")
				ok = false
				continue
			case !have || n.Verdict != explain.OK || n.Score == nil:
				scores = append(scores, node+" "+describeNode(n))
				ok = false
				continue
			}
			scores = append(scores, node+"="+strconv.FormatInt(*n.Score, 10))
			switch {
			case first < 0:
				first = *n.Score
			case *n.Score != first:
				ok = false
			}
		}
		if first >= 0 && i > 0 && prev >= 0 && first >= prev {
			ok = false
		}
		if first >= 0 {
			prev = first
		}
		got = append(got, strings.Join(scores, ", "))
	}
	c.Passed = ok
	c.Got = strings.Join(got, "; ")
	return c
}

// checkUnprotected compares the reasons a pod is not protected.
func checkUnprotected(name string, want []string, got []policy.Unprotected) Check {
	reasons := make([]string, len(got))
	for i, u := range got {
		reasons[i] = u.Reason
	}
	w, g := slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(reasons))
	c := Check{Name: name, Passed: slices.Equal(w, g), Want: list(w), Got: list(g)}
	if len(w) == 0 {
		c.Want = "protected"
	}
	if len(g) == 0 {
		c.Got = "protected"
	} else if !c.Passed {
		messages := make([]string, len(got))
		for i, u := range got {
			messages[i] = u.Message
		}
		c.Got += ": " + strings.Join(messages, "; ")
	}
	return c
}

// checkViolations: the audit finds exactly the violations wanted, each a
// check of its own, and one more check for those it finds beyond them.
func checkViolations(want []Violation, got []audit.Violation) []Check {
	key := func(rule, node string, pods []string) string {
		p := slices.Sorted(slices.Values(pods))
		return fmt.Sprintf("%s on %s between %s", rule, node, strings.Join(p, " and "))
	}
	found := map[string]bool{}
	for _, v := range got {
		found[key(v.Rule, v.Node, v.Pods)] = true
	}
	var out []Check
	expected := map[string]bool{}
	for _, v := range want {
		k := key(v.Rule, v.Node, v.Pods)
		expected[k] = true
		c := Check{Name: "violation " + k, Passed: found[k], Want: "found", Got: "found"}
		if !c.Passed {
			c.Got = "not found; the audit found " + listViolations(got)
		}
		out = append(out, c)
	}
	var extra []string
	for _, v := range got {
		if k := key(v.Rule, v.Node, v.Pods); !expected[k] {
			extra = append(extra, k)
		}
	}
	c := Check{Name: "no other violation", Passed: len(extra) == 0, Want: "none", Got: "none"}
	if len(extra) > 0 {
		c.Got = strings.Join(extra, "; ")
	}
	return append(out, c)
}

func listViolations(vs []audit.Violation) string {
	if len(vs) == 0 {
		return "none"
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%s on %s between %s", v.Rule, v.Node, strings.Join(v.Pods, " and "))
	}
	return strings.Join(parts, "; ")
}

// list writes names as [a, b], and none as [].
func list(names []string) string { return "[" + strings.Join(names, ", ") + "]" }
