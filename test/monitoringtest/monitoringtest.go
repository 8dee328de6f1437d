// Package monitoringtest reads the monitoring content shipped with the Helm
// chart (the Prometheus rules, their promtool tests and the Grafana
// dashboard, in deploy/helm/regosched/files) and finds which metrics and
// labels their PromQL queries use, so that tests can check them: against
// the metrics regosched declares (this package's tests) and against the
// /metrics of a running regosched and kube-scheduler (test/e2e).
//
// Metric names are found by a small PromQL lexer (Uses), not by the
// Prometheus parser: importing github.com/prometheus/prometheus would add
// that module and its dependency graph to the main go.mod (and raise shared
// dependencies of the production binary, such as prometheus/common), only
// for tests. The lexer knows PromQL's strings, label matchers, ranges,
// grouping clauses, aggregations, functions and keywords; its tests cover
// every construct the rules and the dashboard use, and `promtool check
// rules` (run by this package's tests) parses the rules with the real
// parser.
package monitoringtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Paths of the monitoring files, relative to the repository root.
const (
	RulesPath     = "deploy/helm/regosched/files/prometheus-rules.yaml"
	RulesTestPath = "deploy/helm/regosched/files/prometheus-rules_test.yaml"
	DashboardPath = "deploy/helm/regosched/files/grafana-dashboard.json"
)

// PromtoolModule is the pinned promtool, run with `go run`.
const PromtoolModule = "github.com/prometheus/prometheus/cmd/promtool@v0.316.0"

// Query is one PromQL expression and where it comes from.
type Query struct {
	Source string // e.g. `alert RegoschedDown`, `panel "Binds by outcome" target A`
	Expr   string
}

// Rule is one alerting or recording rule of the rules file.
type Rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// RuleGroup is a group of the rules file.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// ReadRules parses the rules file under root.
func ReadRules(root string) ([]RuleGroup, error) {
	b, err := os.ReadFile(filepath.Join(root, RulesPath))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Groups []RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", RulesPath, err)
	}
	return doc.Groups, nil
}

// RuleQueries returns the expression of every rule under root.
func RuleQueries(root string) ([]Query, error) {
	groups, err := ReadRules(root)
	if err != nil {
		return nil, err
	}
	var qs []Query
	for _, g := range groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "record " + r.Record
			}
			qs = append(qs, Query{Source: name, Expr: r.Expr})
		}
	}
	return qs, nil
}

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	Title         string                    `json:"title"`
	UID           string                    `json:"uid"`
	SchemaVersion int                       `json:"schemaVersion"`
	Panels        []Panel                   `json:"panels"`
	Templating    struct{ List []Variable } `json:"templating"`
}

// Panel is a dashboard panel; rows hold their collapsed panels in Panels.
type Panel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *Datasource              `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []Target                 `json:"targets"`
	Panels     []Panel                  `json:"panels"`
}

// Target is a panel's query.
type Target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *Datasource `json:"datasource"`
}

// Datasource names a data source by type and uid.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Variable is a templating variable. Query is a string or, in newer
// dashboards, an object with a "query" string.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *Datasource     `json:"datasource"`
}

// QueryText is the variable's query as a string.
func (v Variable) QueryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &o) == nil && o.Query != "" {
		return o.Query
	}
	return v.Definition
}

// ReadDashboard parses the dashboard under root.
func ReadDashboard(root string) (*Dashboard, error) {
	b, err := os.ReadFile(filepath.Join(root, DashboardPath))
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", DashboardPath, err)
	}
	return &d, nil
}

// AllPanels returns the dashboard's panels, those inside rows included.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// labelValues matches Grafana's label_values(selector, label) and
// query_result(expr) variable queries.
var (
	labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\(\s*(.*)\s*\)\s*$`)
)

// DashboardQueries returns every PromQL expression of the dashboard under
// root: the panels' targets and the query variables' selectors.
func DashboardQueries(root string) ([]Query, error) {
	d, err := ReadDashboard(root)
	if err != nil {
		return nil, err
	}
	var qs []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			qs = append(qs, Query{Source: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: t.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := v.QueryText()
		var expr string
		if m := labelValues.FindStringSubmatch(q); m != nil {
			expr = m[1]
		} else if m := queryResult.FindStringSubmatch(q); m != nil {
			expr = m[1]
		} else {
			return nil, fmt.Errorf("variable %s: query %q is neither label_values(selector, label) nor query_result(expr)", v.Name, q)
		}
		qs = append(qs, Query{Source: "variable " + v.Name, Expr: expr})
	}
	return qs, nil
}

// Use is a metric a query selects, with the names of the labels its
// matchers test.
type Use struct {
	Metric string
	Labels []string
}

// aggregations are PromQL's aggregation operators, which may be followed
// by a grouping clause before their parenthesis (sum by (x) (...)).
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// keywords are PromQL words that are never metric names; grouping ones
// take a parenthesised list of label names.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true, "start": true, "end": true, "step": true,
}

var grouping = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// Uses lists the metrics expr selects, in order of appearance, one entry
// per selector. Grafana variables ($job, ${job}, $__rate_interval) may
// appear wherever PromQL takes a string or a duration.
func Uses(expr string) ([]Use, error) {
	l := lexer{s: expr}
	var uses []Use
	for {
		l.space()
		if l.eof() {
			return uses, nil
		}
		c := l.peek()
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := l.str(); err != nil {
				return nil, err
			}
		case c == '#':
			for !l.eof() && l.peek() != '\n' {
				l.i++
			}
		case c == '[':
			if err := l.skipTo(']'); err != nil {
				return nil, err
			}
		case c == '$':
			l.variable()
		case c == '{':
			// A selector without a metric name before its braces.
			labels, name, err := l.matchers()
			if err != nil {
				return nil, err
			}
			if name == "" {
				return nil, fmt.Errorf("selector without a metric name at offset %d in %q", l.i, expr)
			}
			uses = append(uses, Use{Metric: name, Labels: labels})
		case isDigit(c) || (c == '.' && l.i+1 < len(l.s) && isDigit(l.s[l.i+1])):
			for !l.eof() && (isIdent(l.peek()) || l.peek() == '.') {
				l.i++
			}
		case isIdentStart(c):
			word := l.ident()
			lower := strings.ToLower(word)
			switch {
			case grouping[lower]:
				l.space()
				if !l.eof() && l.peek() == '(' {
					if err := l.skipTo(')'); err != nil {
						return nil, err
					}
				}
			case keywords[lower] || aggregations[lower]:
			default:
				l.space()
				if !l.eof() && l.peek() == '(' {
					continue // a function
				}
				u := Use{Metric: word}
				if !l.eof() && l.peek() == '{' {
					labels, name, err := l.matchers()
					if err != nil {
						return nil, err
					}
					if name != "" {
						return nil, fmt.Errorf("metric %s also named by __name__ in %q", word, expr)
					}
					u.Labels = labels
				}
				uses = append(uses, u)
			}
		default:
			l.i++ // an operator, a comma, a parenthesis, @
		}
	}
}

// MetricNames returns the distinct metric names the queries use, sorted,
// each with the sources that use it.
func MetricNames(qs []Query) (map[string][]string, error) {
	names := map[string][]string{}
	for _, q := range qs {
		uses, err := Uses(q.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q.Source, err)
		}
		for _, u := range uses {
			if !slices.Contains(names[u.Metric], q.Source) {
				names[u.Metric] = append(names[u.Metric], q.Source)
			}
		}
	}
	return names, nil
}

type lexer struct {
	s string
	i int
}

func (l *lexer) eof() bool  { return l.i >= len(l.s) }
func (l *lexer) peek() byte { return l.s[l.i] }

func (l *lexer) space() {
	for !l.eof() && strings.IndexByte(" \t\r\n", l.peek()) >= 0 {
		l.i++
	}
}

func (l *lexer) ident() string {
	start := l.i
	for !l.eof() && isIdent(l.peek()) {
		l.i++
	}
	return l.s[start:l.i]
}

// str consumes a string literal and returns its raw content.
func (l *lexer) str() (string, error) {
	q := l.peek()
	start := l.i
	l.i++
	var b strings.Builder
	for !l.eof() {
		c := l.peek()
		switch {
		case c == q:
			l.i++
			return b.String(), nil
		case c == '\\' && q != '`' && l.i+1 < len(l.s):
			b.WriteByte(l.s[l.i+1])
			l.i += 2
		default:
			b.WriteByte(c)
			l.i++
		}
	}
	return "", fmt.Errorf("unterminated string at offset %d in %q", start, l.s)
}

// skipTo consumes up to and including the bracket that closes the one at
// the current position, skipping strings inside.
func (l *lexer) skipTo(closing byte) error {
	opening := l.peek()
	start := l.i
	depth := 0
	for !l.eof() {
		c := l.peek()
		switch c {
		case '"', '\'', '`':
			if _, err := l.str(); err != nil {
				return err
			}
			continue
		case opening:
			depth++
		case closing:
			depth--
			if depth == 0 {
				l.i++
				return nil
			}
		}
		l.i++
	}
	return fmt.Errorf("unclosed %c at offset %d in %q", opening, start, l.s)
}

// variable consumes a Grafana variable: $name or ${name[:format]}.
func (l *lexer) variable() {
	l.i++
	if !l.eof() && l.peek() == '{' {
		for !l.eof() && l.peek() != '}' {
			l.i++
		}
		if !l.eof() {
			l.i++
		}
		return
	}
	l.ident()
}

// matchers consumes {label op "value", ...} and returns the label names
// (but __name__) and the value of an equality matcher on __name__.
func (l *lexer) matchers() ([]string, string, error) {
	start := l.i
	l.i++ // {
	var labels []string
	name := ""
	for {
		l.space()
		if l.eof() {
			return nil, "", fmt.Errorf("unclosed { at offset %d in %q", start, l.s)
		}
		switch c := l.peek(); {
		case c == '}':
			l.i++
			return labels, name, nil
		case c == ',':
			l.i++
		case isIdentStart(c):
			label := l.ident()
			l.space()
			op := ""
			for !l.eof() && strings.IndexByte("=!~", l.peek()) >= 0 {
				op += string(l.peek())
				l.i++
			}
			if op != "=" && op != "!=" && op != "=~" && op != "!~" {
				return nil, "", fmt.Errorf("label %s: operator %q at offset %d in %q", label, op, l.i, l.s)
			}
			l.space()
			if l.eof() || strings.IndexByte("\"'`", l.peek()) < 0 {
				return nil, "", fmt.Errorf("label %s: no string value at offset %d in %q", label, l.i, l.s)
			}
			v, err := l.str()
			if err != nil {
				return nil, "", err
			}
			if label == "__name__" {
				if op == "=" {
					name = v
				}
				continue
			}
			if !slices.Contains(labels, label) {
				labels = append(labels, label)
			}
		case c == '"':
			// A quoted metric name inside braces (UTF-8 names): {"name", ...}.
			v, err := l.str()
			if err != nil {
				return nil, "", err
			}
			name = v
		default:
			return nil, "", fmt.Errorf("unexpected %q in matchers at offset %d in %q", c, l.i, l.s)
		}
	}
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdent(c byte) bool      { return isIdentStart(c) || isDigit(c) }

// Exposition is what a /metrics page in the Prometheus text format says:
// the families its TYPE lines declare and the label names each sample name
// carries.
type Exposition struct {
	Types   map[string]string          // family -> counter, gauge, histogram, summary, untyped
	Samples map[string]map[string]bool // sample name -> label names seen
}

// ParseExposition reads the Prometheus text format.
func ParseExposition(body []byte) (*Exposition, error) {
	e := &Exposition{Types: map[string]string{}, Samples: map[string]map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(rest)
			if len(f) != 2 {
				return nil, fmt.Errorf("line %d: bad TYPE line %q", n, line)
			}
			e.Types[f[0]] = f[1]
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		l := lexer{s: line}
		name := l.ident()
		if name == "" {
			return nil, fmt.Errorf("line %d: no metric name in %q", n, line)
		}
		labels := e.Samples[name]
		if labels == nil {
			labels = map[string]bool{}
			e.Samples[name] = labels
		}
		if !l.eof() && l.peek() == '{' {
			names, _, err := l.matchers()
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			for _, ln := range names {
				labels[ln] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return e, nil
}

// Family returns the family a sample name belongs to and its type:
// name itself, or a histogram's or summary's family for its _bucket, _sum
// and _count samples.
func (e *Exposition) Family(name string) (family, typ string, ok bool) {
	if t, ok := e.Types[name]; ok {
		return name, t, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if !found {
			continue
		}
		if t := e.Types[base]; t == "histogram" || (t == "summary" && suffix != "_bucket") {
			return base, t, true
		}
	}
	return "", "", false
}

// Has reports whether name is declared (a TYPE line for it or its family)
// and whether it has at least one sample.
func (e *Exposition) Has(name string) (declared, sampled bool) {
	_, _, declared = e.Family(name)
	_, sampled = e.Samples[name]
	return declared, sampled
}
