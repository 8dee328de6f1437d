package explain

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/regosched/regosched/internal/plumbing/output"
)

// Render writes r to w in format f.
func Render(w io.Writer, r *Report, f output.Format) error {
	switch f {
	case output.Table:
		return renderTable(w, r)
	case output.JSON:
		return output.WriteJSON(w, r)
	}
	return fmt.Errorf("unknown output format %q", f)
}

// renderTable writes a header (what the decision depends on) and one line
// per node.
func renderTable(w io.Writer, r *Report) error {
	hw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	line := func(key string, values ...string) {
		for i, v := range values {
			if i > 0 {
				key = ""
			}
			fmt.Fprintf(hw, "%s\t%s\n", key, v)
		}
	}
	line("Pod:", r.Pod)
	line("Policy:", fmt.Sprintf("%s, revision %s", r.Policy.Source, r.Policy.Revision))
	if r.BoundTo != "" {
		line("Bound to:", r.BoundTo+" (the pod itself; it is not its own peer)")
	}
	for _, u := range r.Unprotected {
		line("No rule applies:", u.Message)
	}
	switch {
	case len(r.PeerKeys) == 0:
		line("Peer keys:", "none: no rule of this policy applies to the pod")
	default:
		line("Peer keys:", r.PeerKeys...)
		if len(r.Peers) == 0 {
			line("Peers:", "none bound")
		}
		peers := make([]string, len(r.Peers))
		for i, p := range r.Peers {
			peers[i] = p.Pod + " on " + p.Node
		}
		line("Peers:", peers...)
	}
	counts := map[Outcome]int{}
	for _, n := range r.Nodes {
		counts[n.Verdict]++
	}
	line("Nodes:", fmt.Sprintf("%d: %d ok, %d failed, %d unresolvable",
		len(r.Nodes), counts[OK], counts[Failed], counts[Unresolvable]))
	if !r.Scored && counts[OK] > 0 {
		line("Scores:", "no preference among the nodes that pass: every one scores 0")
	}
	if err := hw.Flush(); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tVERDICT\tSCORE\tREASON")
	for _, n := range r.Nodes {
		score := "-"
		if n.Score != nil {
			score = strconv.FormatInt(*n.Score, 10)
		}
		// Trailing tabs would pad the last column with spaces.
		fmt.Fprintln(tw, strings.TrimRight(strings.Join([]string{n.Node, string(n.Verdict), score, n.Reason}, "\t"), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
