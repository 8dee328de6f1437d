// Package policy evaluates a compiled OPA bundle of placement rules. Its
// queries are prepared once, and evaluated with inputs built straight as
// Rego values (no JSON round trip).
//
// The contract, for a bundle (rego/ is the default policy):
//
//	rule                                  input    result
//	data.regosched.peer_keys             {pod}    set of group keys: pods that share one are peers
//	data.regosched.claims                {pod}    {marks: {token: description},
//	                                                separate: [{mark, rule, topology_key}],
//	                                                spread: [{mark, rule, topology_key, weight}],
//	                                                cap: [{mark, rule, topology_key, max | quorum, size}]}
//	data.regosched.preemption.protected  {pod}    true: never evict this pod (optional)
//	data.regosched.unprotected           {pod}    set of {reason, message}: why no hard rule protects the pod (optional)
//	data.regosched.live.roles            {pod}    set of {workload, source, port_names, port}: ask the pod for its role (optional)
//	data.regosched.live.labels           none     {role, shard}: the labels live roles are written as (optional)
//	data.regosched.validate.errors       none     set of strings: the data's mistakes (optional)
//
// A pod is {name, namespace, uid, labels, priority, node}, node "" while
// pending. peer_keys and claims are required. Rego looks at one pod at a
// time: Judge joins in Go the pending pod's separate and spread with its
// peers' marks, so that no Rego runs per peer, and the arithmetic over
// candidate nodes is left to the callers.
//
// claims are evaluated with peer_keys, once per version of a bound pod (its
// marks, kept by the placement cache) and once per pending pod (separate
// and spread). Each part is queried on its own: a policy that writes them
// as rules of package regosched.claims has only the part asked for
// evaluated, and a part undefined for a pod leaves the others.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/regosched/regosched/internal/core/model"
)

// The entry points of the contract.
const (
	PeerKeysRule = "data.regosched.peer_keys"
	ClaimsRule   = "data.regosched.claims"
	// ProtectedRule is optional: without it no pod is protected from preemption.
	ProtectedRule = "data.regosched.preemption.protected"
)

// removedRules were pairwise rules (and the facts that fed them), no longer
// evaluated: a bundle that defines one is refused, so that nobody believes
// such a rule protects them.
var removedRules = []string{"data.regosched.filter.conflicts", "data.regosched.prioritize.penalties", "data.regosched.facts"}

// Policy is a compiled bundle, ready to evaluate. It is immutable and safe for
// concurrent use.
type Policy struct {
	origin *model.Origin
	keys   rego.PreparedEvalQuery
	// protected, unprotected: nil when the bundle has no such rule.
	protected   *rego.PreparedEvalQuery
	unprotected *rego.PreparedEvalQuery
	live        live
	// describeTimeout bounds each evaluation off the request path (see
	// DescribeTimeout).
	describeTimeout time.Duration
	// Three views of a pod, each evaluated in one pass with peer_keys: all
	// claims, as a peer (marks) and as the pending pod (separate, spread).
	all, asPeer, asPending description
}

// description is a prepared query for [peer_keys, claims parts] (those
// asked for). Each part is asked for as [x | x := part], a zero- or
// one-element array, so that a part undefined for a pod (claims without
// spread) leaves the others, rather than making the whole answer undefined.
type description struct {
	query *rego.PreparedEvalQuery
	rules string // what query evaluates, for errors
	parts model.Parts
	// marksAt, separateAt, spreadAt, capAt: the index of each part in the
	// answer, 0 when not asked for.
	marksAt, separateAt, spreadAt, capAt int
	n                                    int
}

// Compile compiles b, prepares its entry points and evaluates each once on a
// sample input, so that a policy that cannot answer is rejected here rather
// than on a scheduling request.
//
// A bundle that calls a network builtin or opa.runtime is refused (see
// refusedBuiltin), and each evaluation on the sample, like each description
// off the request path, is cut short after DescribeTimeout.
func Compile(ctx context.Context, b *bundle.Bundle) (*Policy, error) {
	return compile(ctx, b, DescribeTimeout)
}

// compile is Compile with the deadline of each evaluation off the request
// path as a parameter, so that tests need not wait seconds for it.
func compile(ctx context.Context, b *bundle.Bundle, timeout time.Duration) (*Policy, error) {
	modules := make(map[string]*ast.Module, len(b.Modules))
	for _, m := range b.Modules {
		modules[m.Path] = m.Parsed
	}
	compiler := newCompiler()
	compiler.Compile(modules)
	if compiler.Failed() {
		return nil, compileErrors("compiling policy", compiler.Errors)
	}
	// Data is read as Rego values: no conversion per evaluation.
	store := inmem.NewFromObjectWithOpts(b.Data, inmem.OptReturnASTValuesOnRead(true))

	p := &Policy{origin: &model.Origin{Revision: revision(b)}, describeTimeout: timeout}
	defined := func(rule string) bool { return len(compiler.GetRules(ast.MustParseRef(rule))) > 0 }
	for _, rule := range removedRules {
		if defined(rule) {
			return nil, fmt.Errorf("policy defines %s, which regosched no longer evaluates: say the rule with %s (see docs/policies.md)", rule, ClaimsRule)
		}
	}
	for _, rule := range []string{PeerKeysRule, ClaimsRule} {
		if !defined(rule) {
			return nil, fmt.Errorf("policy defines no rule %s", rule)
		}
	}
	if defined(ValidateRule) {
		if err := validateData(ctx, compiler, store, timeout); err != nil {
			return nil, err
		}
	}
	var err error
	if p.keys, err = prepare(ctx, compiler, store, ast.NewTerm(ast.MustParseRef(PeerKeysRule))); err != nil {
		return nil, fmt.Errorf("preparing %s: %w", PeerKeysRule, err)
	}
	for _, q := range []struct {
		rule string
		dst  **rego.PreparedEvalQuery
	}{
		{ProtectedRule, &p.protected},
		{UnprotectedRule, &p.unprotected},
	} {
		if !defined(q.rule) {
			continue
		}
		pq, err := prepare(ctx, compiler, store, ast.NewTerm(ast.MustParseRef(q.rule)))
		if err != nil {
			return nil, fmt.Errorf("preparing %s: %w", q.rule, err)
		}
		*q.dst = &pq
	}
	if p.live, err = prepareLive(ctx, compiler, store, defined, timeout); err != nil {
		return nil, err
	}
	for _, v := range []struct {
		view  *description
		parts model.Parts
	}{{&p.all, model.AllParts}, {&p.asPeer, model.MarksPart}, {&p.asPending, model.AvoidsPart}} {
		if *v.view, err = prepareDescription(ctx, compiler, store, v.parts); err != nil {
			return nil, err
		}
	}
	if err := p.smokeTest(ctx); err != nil {
		return nil, fmt.Errorf("evaluating policy on a sample pod: %w", err)
	}
	return p, nil
}

// prepareDescription prepares the query of one view of a pod: peer_keys
// and the parts of claims asked for.
func prepareDescription(ctx context.Context, c *ast.Compiler, store storage.Store, parts model.Parts) (description, error) {
	d := description{parts: parts}
	terms := []*ast.Term{ast.NewTerm(ast.MustParseRef(PeerKeysRule))}
	rules := []string{PeerKeysRule}
	for _, part := range []struct {
		name string
		part model.Parts
		at   *int
	}{{"marks", model.MarksPart, &d.marksAt}, {"separate", model.AvoidsPart, &d.separateAt}, {"spread", model.AvoidsPart, &d.spreadAt}, {"cap", model.AvoidsPart, &d.capAt}} {
		if parts&part.part == 0 {
			continue
		}
		*part.at = len(terms)
		terms = append(terms, zeroOrOne(ClaimsRule, part.name))
		rules = append(rules, ClaimsRule+"."+part.name)
	}
	d.rules, d.n = strings.Join(rules, ", "), len(terms)
	pq, err := prepare(ctx, c, store, ast.ArrayTerm(terms...))
	if err != nil {
		return d, fmt.Errorf("preparing %s: %w", d.rules, err)
	}
	d.query = &pq
	return d, nil
}

// zeroOrOne is [x | k := field; x := rule[k]]: the field of rule in an
// array, empty when it is undefined. k is bound before the reference is
// evaluated, so only the rules of that field run, but the type checker
// cannot reject a claims object without that field, which is allowed.
func zeroOrOne(rule, field string) *ast.Term {
	x, k := ast.VarTerm("x"), ast.VarTerm("k")
	ref := ast.MustParseRef(rule)
	return ast.ArrayComprehensionTerm(x, ast.NewBody(
		ast.Assign.Expr(k, ast.StringTerm(field)),
		ast.Assign.Expr(x, ast.NewTerm(ref.Append(k))),
	))
}

// prepare readies a query for a single term, whose results stay Rego values
// (read field by field by the callers, never converted to Go maps).
func prepare(ctx context.Context, c *ast.Compiler, store storage.Store, term *ast.Term) (rego.PreparedEvalQuery, error) {
	return rego.New(
		rego.ParsedQuery(ast.NewBody(ast.NewExpr(term))),
		rego.Compiler(c),
		// The compiler's own, so that the query is held to them too.
		rego.Capabilities(c.Capabilities()),
		rego.Store(store),
		rego.StoreReadAST(true),
		rego.GenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }),
	).PrepareForEval(ctx)
}

// Revision names the bundle: the manifest's revision, or a digest of its
// content when the manifest has none.
func (p *Policy) Revision() string { return p.origin.Revision }

// Origin identifies this compiled policy in the claims it describes.
func (p *Policy) Origin() *model.Origin { return p.origin }

func revision(b *bundle.Bundle) string {
	if b.Manifest.Revision != "" {
		return b.Manifest.Revision
	}
	h := sha256.New()
	paths := make([]string, 0, len(b.Modules))
	raw := map[string][]byte{}
	for _, m := range b.Modules {
		paths = append(paths, m.Path)
		raw[m.Path] = m.Raw
	}
	sort.Strings(paths)
	for _, path := range paths {
		_, _ = h.Write([]byte(path))
		_, _ = h.Write(raw[path])
	}
	data, _ := json.Marshal(b.Data) // maps marshal with sorted keys
	_, _ = h.Write(data)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// eval runs a prepared query and returns its value, nil when undefined.
//
// Left to itself, Eval starts a goroutine per query to watch ctx for
// cancellation; on the request path that goroutine and the wake-ups it
// causes cost more than evaluating the default policy. context.AfterFunc
// gives the same cancellation with no goroutine unless ctx is cancelled.
func eval(ctx context.Context, pq rego.PreparedEvalQuery, input ast.Value) (ast.Value, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluating the policy: %w", err)
	}
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	defer stop()
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(input), rego.EvalExternalCancel(cancel))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// OPA's error says only that the caller cancelled: say whether
			// it was a deadline, for errors.Is and for people.
			return nil, fmt.Errorf("evaluating the policy: %w: %w", ctxErr, err)
		}
		return nil, err
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, nil
	}
	t, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return nil, errors.New("unexpected result type")
	}
	return t.Value, nil
}
