package verify

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/regosched/regosched/internal/plumbing/output"
)

// Formats of a report: the table and JSON of the other commands, and
// JUnit XML, which CI systems (GitHub Actions reporters, GitLab, Jenkins)
// show per test.
const (
	Table = output.Table
	JSON  = output.JSON
	JUnit = output.Format("junit")
)

// ParseFormat checks an -o value.
func ParseFormat(s string) (output.Format, error) {
	switch f := output.Format(s); f {
	case Table, JSON, JUnit:
		return f, nil
	}
	return "", fmt.Errorf("unknown output format %q: want table, json or junit", s)
}

// Render writes r to w in format f.
func Render(w io.Writer, r *Report, f output.Format) error {
	switch f {
	case Table:
		return renderTable(w, r)
	case JSON:
		return output.WriteJSON(w, r)
	case JUnit:
		return renderJUnit(w, r)
	}
	return fmt.Errorf("unknown output format %q", f)
}

// renderTable writes a line per case, then every failure with what was
// wanted and what the policy decided, then the totals.
func renderTable(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SUITE\tCASE\tPOD\tRESULT")
	for _, s := range r.Suites {
		if s.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\tERROR\n", s.Name)
		}
		for _, c := range s.Cases {
			pod := c.Pod
			if pod == "" {
				pod = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, c.Name, pod, caseResult(c))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	var b strings.Builder
	for _, s := range r.Suites {
		if s.Error != "" {
			fmt.Fprintf(&b, "\nERROR %s (%s): %s\n", s.Name, s.File, s.Error)
		}
		for _, c := range s.Cases {
			if c.Error != "" {
				fmt.Fprintf(&b, "\nERROR %s/%s (%s): %s\n", s.Name, c.Name, s.File, c.Error)
			}
			for _, k := range c.Checks {
				if !k.Passed {
					fmt.Fprintf(&b, "\nFAIL %s/%s: %s\n  want: %s\n  got:  %s\n", s.Name, c.Name, k.Name, k.Want, k.Got)
				}
			}
		}
	}
	fmt.Fprintf(&b, "\nPolicy %s, revision %s: %d checks passed, %d failed, %d could not run.\n",
		r.Policy.Source, r.Policy.Revision, r.Passed, r.Failed, r.Errors)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

func caseResult(c CaseResult) string {
	if c.Error != "" {
		return "ERROR"
	}
	failed := 0
	for _, k := range c.Checks {
		if !k.Passed {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Sprintf("FAIL (%d of %d checks)", failed, len(c.Checks))
	}
	return fmt.Sprintf("ok (%d checks)", len(c.Checks))
}

// The JUnit XML schema as Jenkins' and Ant's reporters read it: a
// testsuite per suite file, a testcase per case.
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name     string      `xml:"name,attr"`
		File     string      `xml:"file,attr,omitempty"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Time     string      `xml:"time,attr"`
		Cases    []junitCase `xml:"testcase"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		ClassName string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitMessage `xml:"failure,omitempty"`
		Error     *junitMessage `xml:"error,omitempty"`
	}
	junitMessage struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
)

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func renderJUnit(w io.Writer, r *Report) error {
	out := junitSuites{Name: "regosched verify"}
	for _, s := range r.Suites {
		js := junitSuite{Name: s.Name, File: s.File}
		if s.Error != "" {
			js.Errors++
			js.Cases = append(js.Cases, junitCase{
				Name: "snapshot", ClassName: s.Name, Time: seconds(0),
				Error: &junitMessage{Message: s.Error, Text: s.Error},
			})
		}
		var total time.Duration
		for _, c := range s.Cases {
			jc := junitCase{Name: c.Name, ClassName: s.Name, Time: seconds(c.Duration)}
			total += c.Duration
			switch {
			case c.Error != "":
				jc.Error = &junitMessage{Message: c.Error, Text: c.Error}
				js.Errors++
			case c.Failed():
				var msgs, text []string
				for _, k := range c.Checks {
					if !k.Passed {
						msgs = append(msgs, k.Name)
						text = append(text, fmt.Sprintf("%s\n  want: %s\n  got:  %s", k.Name, k.Want, k.Got))
					}
				}
				jc.Failure = &junitMessage{Message: "failed: " + strings.Join(msgs, "; "), Text: strings.Join(text, "\n")}
				js.Failures++
			}
			js.Cases = append(js.Cases, jc)
		}
		js.Tests = len(js.Cases)
		js.Time = seconds(total)
		out.Tests += js.Tests
		out.Failures += js.Failures
		out.Errors += js.Errors
		out.Suites = append(out.Suites, js)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
