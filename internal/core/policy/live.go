package policy

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"

	"github.com/regosched/regosched/internal/core/model"
)

// The optional entry points of live roles: which pods to ask for their
// role and where (input {pod}), and the labels to write what they say as.
const (
	LiveRolesRule  = "data.regosched.live.roles"
	LiveLabelsRule = "data.regosched.live.labels"
)

// LiveSource says that a pod's role is to be read from the software itself.
type LiveSource struct {
	Workload  string   `json:"workload"`
	Source    string   `json:"source"` // "redis"
	PortNames []string `json:"port_names"`
	Port      int      `json:"port"`
}

// LiveLabels are the pod labels live roles are written as.
type LiveLabels struct {
	Role  string `json:"role"`
	Shard string `json:"shard"`
}

// live holds what a policy says of live roles; zero when it says nothing.
type live struct {
	roles  *rego.PreparedEvalQuery
	labels LiveLabels
}

// prepareLive prepares the live roles rules, if defined, and reads the
// labels, cut short after timeout.
func prepareLive(ctx context.Context, c *ast.Compiler, store storage.Store, defined func(string) bool, timeout time.Duration) (live, error) {
	var l live
	if !defined(LiveRolesRule) {
		return l, nil
	}
	pq, err := prepare(ctx, c, store, ast.NewTerm(ast.MustParseRef(LiveRolesRule)))
	if err != nil {
		return l, fmt.Errorf("preparing %s: %w", LiveRolesRule, err)
	}
	l.roles = &pq
	if !defined(LiveLabelsRule) {
		return l, fmt.Errorf("policy defines %s but not %s", LiveRolesRule, LiveLabelsRule)
	}
	lq, err := prepare(ctx, c, store, ast.NewTerm(ast.MustParseRef(LiveLabelsRule)))
	if err != nil {
		return l, fmt.Errorf("preparing %s: %w", LiveLabelsRule, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := eval(ctx, lq, ast.NewObject())
	if err != nil {
		return l, fmt.Errorf("evaluating %s: %w", LiveLabelsRule, err)
	}
	if v == nil {
		return l, fmt.Errorf("%s is undefined", LiveLabelsRule)
	}
	if err := ast.As(v, &l.labels); err != nil || l.labels.Role == "" || l.labels.Shard == "" {
		return l, fmt.Errorf("%s: %v is not {role, shard} label names", LiveLabelsRule, v)
	}
	return l, nil
}

// LiveLabels are the labels live roles are written as; ok is false when
// the policy reads no roles live.
func (p *Policy) LiveLabels() (labels LiveLabels, ok bool) {
	return p.live.labels, p.live.roles != nil
}

// LiveRoles says where to ask pod for its role; none when its role is read
// from labels alone. Several sources are sorted by workload.
func (p *Policy) LiveRoles(ctx context.Context, pod *model.Pod) ([]LiveSource, error) {
	if p.live.roles == nil {
		return nil, nil
	}
	v, err := eval(ctx, *p.live.roles, podInput(pod))
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", LiveRolesRule, err)
	}
	if v == nil {
		return nil, nil
	}
	set, ok := v.(ast.Set)
	if !ok {
		return nil, fmt.Errorf("%s: want a set, got %v", LiveRolesRule, ast.ValueName(v))
	}
	var out []LiveSource
	var bad error
	set.Foreach(func(t *ast.Term) {
		var s LiveSource
		if err := ast.As(t.Value, &s); err != nil || s.Source == "" {
			bad = fmt.Errorf("%s: %v is not {workload, source, port_names, port}", LiveRolesRule, t)
			return
		}
		out = append(out, s)
	})
	if bad != nil {
		return nil, bad
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Workload < out[j].Workload })
	return out, nil
}
