package repair

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/plumbing/output"
)

// planReport is `regosched audit --plan -o json`: the audit's report and
// one step per violation, in the same order.
type planReport struct {
	audit.Report
	Repairs []Step `json:"repairs"`
}

// Render writes the report, then each violation's repair, in format f.
func Render(w io.Writer, r audit.Report, steps []Step, f output.Format) error {
	switch f {
	case output.JSON:
		if r.Violations == nil {
			r.Violations = []audit.Violation{}
		}
		if steps == nil {
			steps = []Step{}
		}
		return output.WriteJSON(w, planReport{Report: r, Repairs: steps})
	case output.Table:
		if err := audit.Render(w, r, f); err != nil {
			return err
		}
		if len(steps) == 0 {
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\nREPAIR\tRULE\tPODS\tTARGET\tWHY")
		for _, s := range steps {
			target := s.Target
			if target == "" {
				target = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Action, s.Violation.Rule, strings.Join(s.Violation.Pods, ","), target, s.Why)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing the plan: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown output format %q", f)
}
