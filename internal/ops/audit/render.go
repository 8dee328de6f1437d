package audit

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/regosched/regosched/internal/plumbing/output"
)

// Render writes r to w in format f.
func Render(w io.Writer, r Report, f output.Format) error {
	switch f {
	case output.Table:
		return renderTable(w, r)
	case output.JSON:
		if r.Violations == nil {
			r.Violations = []Violation{} // [] rather than null, for scripts
		}
		return output.WriteJSON(w, r)
	}
	return fmt.Errorf("unknown output format %q", f)
}

// renderTable writes one line per violation, pods named within the
// namespace column when they are in it, then a summary line.
func renderTable(w io.Writer, r Report) error {
	if len(r.Violations) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tNAMESPACE\tNODE\tPODS\tREASON")
		for _, v := range r.Violations {
			pods := make([]string, len(v.Pods))
			for i, p := range v.Pods {
				pods[i] = strings.TrimPrefix(p, v.Namespace+"/")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Rule, v.Namespace, v.Node, strings.Join(pods, ","), v.Reason)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	summary := fmt.Sprintf("%s among %s, policy revision %s\n",
		plural(len(r.Violations), "violation"), plural(r.Pods, "bound pod"), r.PolicyRevision)
	if len(r.Skipped) > 0 {
		summary += fmt.Sprintf("the policy failed to judge %s: %s\n", plural(len(r.Skipped), "pod"), strings.Join(r.Skipped, ", "))
	}
	if len(r.Waiting) > 0 {
		summary += fmt.Sprintf("%s wait for a pod's role to be read from Redis\n", plural(len(r.Waiting), "more violation"))
	}
	if _, err := io.WriteString(w, summary); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
