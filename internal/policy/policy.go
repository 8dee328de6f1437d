// Package policy loads an OPA bundle of placement rules, prepares its queries
// once, and evaluates them per request with inputs built straight as Rego
// values (no JSON round trip).
//
// A bundle must define peer_keys, and claims or both conflicts and penalties
// (or all three); the others are optional (see rego/ for the default policy):
//
//	data.regosched.peer_keys            input {pod}              set of group keys
//	data.regosched.claims               input {pod}              {marks, separate, spread}
//	data.regosched.filter.conflicts     input {pod, peers, nodes} set of {node, rule, reason, peer}
//	data.regosched.prioritize.penalties input {pod, peers, nodes} set of {topology_key, value, weight, rule, peer}
//	data.regosched.preemption.protected input {pod}              true: never evict this pod
//	data.regosched.facts                input {pod}              any value
//	data.regosched.unprotected          input {pod}              set of {reason, message}: why no hard rule protects the pod
//	data.regosched.live.roles           input {pod}              set of {workload, source, port_names, port}: ask the pod for its role
//	data.regosched.live.labels          no input                 {role, shard}: the labels live roles are written as
//	data.regosched.validate.errors      no input                 set of strings: the data's mistakes
//
// Rego looks only at the pending pod and its peers; the arithmetic over
// candidate nodes is done in Go by the callers.
//
// claims and facts are evaluated with peer_keys, once per version of a bound
// pod (when the placement cache indexes it: facts and marks) and once per
// request for the pending pod (facts, separate and spread). Each part is
// queried on its own: a policy that writes them as rules of package
// regosched.claims has only the parts asked for evaluated, and a part
// undefined for a pod leaves the others. claims say what a pod is to its
// peers (marks: token -> description) and which peers it avoids (separate:
// [{mark, rule}], hard, on the node; spread: [{mark, rule, topology_key,
// weight}], soft); Go joins the pending pod's entries with its peers' marks,
// so that no Rego runs per peer (claims.go). conflicts and penalties are
// pairwise rules for what marks cannot say; their answers add to the join's.
// facts come back as pod.facts of that pod in every later input of those
// rules under the same policy, so that they need not work out again per peer
// what the labels mean. A pod without facts (none defined, or computed under
// another policy) has no pod.facts field.
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
)

// The entry points a bundle must define.
const (
	PeerKeysRule  = "data.regosched.peer_keys"
	ConflictsRule = "data.regosched.filter.conflicts"
	PenaltiesRule = "data.regosched.prioritize.penalties"
	// ProtectedRule is optional: without it no pod is protected from preemption.
	ProtectedRule = "data.regosched.preemption.protected"
	// FactsRule is optional: without it inputs carry no pod.facts.
	FactsRule = "data.regosched.facts"
	// ClaimsRule is optional when both ConflictsRule and PenaltiesRule are
	// defined, and required otherwise.
	ClaimsRule = "data.regosched.claims"
)

// Policy is a compiled bundle, ready to evaluate. It is immutable and safe for
// concurrent use.
type Policy struct {
	revision string
	keys     rego.PreparedEvalQuery
	// conflicts, penalties, protected: nil when the bundle has no such rule.
	conflicts *rego.PreparedEvalQuery
	penalties *rego.PreparedEvalQuery
	protected *rego.PreparedEvalQuery
	// unprotected: nil when the bundle has no such rule.
	unprotected *rego.PreparedEvalQuery
	live        live
	// both evaluates conflicts and penalties in one pass (they share the
	// work of matching the peers, which dominates); nil unless both exist.
	both *rego.PreparedEvalQuery
	// describeTimeout bounds each evaluation off the request path (see
	// DescribeTimeout).
	describeTimeout time.Duration
	// claims: whether the bundle defines claims.
	claims bool
	// Three views of a pod, each evaluated in one pass with peer_keys: all
	// (facts and claims), as a peer (facts, marks) and as the pending pod
	// (facts, separate and spread).
	all, asPeer, asPending description
}

// description is a prepared query for [peer_keys, facts, claims parts]
// (those defined and asked for). Each optional part is asked for as
// [x | x := part], a zero- or one-element array, so that a part undefined
// for a pod (a policy's facts for pods it does not know, claims without
// spread) leaves the others, rather than making the whole answer undefined.
type description struct {
	query *rego.PreparedEvalQuery // nil: peer_keys alone
	rules string                  // what query evaluates, for errors
	n     int
	// factsAt: the index of facts in the answer, -1 when not in it;
	// claims: the claims parts in the answer, in this order.
	factsAt       int
	claims        []claimsPart
	marks, avoids bool // the claims parts the query reads
}

type claimsPart struct {
	name string // marks, separate or spread
	at   int
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

	p := &Policy{revision: revision(b), describeTimeout: timeout}
	defined := func(rule string) bool { return len(compiler.GetRules(ast.MustParseRef(rule))) > 0 }
	if !defined(PeerKeysRule) {
		return nil, fmt.Errorf("policy defines no rule %s", PeerKeysRule)
	}
	if !defined(ClaimsRule) {
		for _, rule := range []string{ConflictsRule, PenaltiesRule} {
			if !defined(rule) {
				return nil, fmt.Errorf("policy defines no rule %s (nor %s)", rule, ClaimsRule)
			}
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
		{ConflictsRule, &p.conflicts},
		{PenaltiesRule, &p.penalties},
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
	if p.conflicts != nil && p.penalties != nil {
		both := ast.ArrayTerm(ast.NewTerm(ast.MustParseRef(ConflictsRule)), ast.NewTerm(ast.MustParseRef(PenaltiesRule)))
		pq, err := prepare(ctx, compiler, store, both)
		if err != nil {
			return nil, fmt.Errorf("preparing %s and %s: %w", ConflictsRule, PenaltiesRule, err)
		}
		p.both = &pq
	}
	if p.live, err = prepareLive(ctx, compiler, store, defined, timeout); err != nil {
		return nil, err
	}
	p.claims = defined(ClaimsRule)
	for _, v := range []struct {
		dst           *description
		marks, avoids bool
	}{{&p.all, true, true}, {&p.asPeer, true, false}, {&p.asPending, false, true}} {
		if *v.dst, err = prepareDescription(ctx, compiler, store, defined(FactsRule), p.claims, v.marks, v.avoids); err != nil {
			return nil, err
		}
	}
	if err := p.smokeTest(ctx); err != nil {
		return nil, fmt.Errorf("evaluating policy on a sample pod: %w", err)
	}
	return p, nil
}

// prepareDescription prepares the query of one view of a pod: peer_keys,
// facts when defined, and of claims (when defined) the parts asked for.
func prepareDescription(ctx context.Context, c *ast.Compiler, store storage.Store, facts, claims, marks, avoids bool) (description, error) {
	d := description{factsAt: -1, marks: marks, avoids: avoids}
	terms := []*ast.Term{ast.NewTerm(ast.MustParseRef(PeerKeysRule))}
	rules := []string{PeerKeysRule}
	optional := func(rule, field string) {
		terms = append(terms, zeroOrOne(rule, field))
		if field != "" {
			rule += "." + field
		}
		rules = append(rules, rule)
	}
	if facts {
		d.factsAt = len(terms)
		optional(FactsRule, "")
	}
	if claims {
		for _, part := range []struct {
			name string
			want bool
		}{{"marks", marks}, {"separate", avoids}, {"spread", avoids}} {
			if part.want {
				d.claims = append(d.claims, claimsPart{part.name, len(terms)})
				optional(ClaimsRule, part.name)
			}
		}
	}
	if len(terms) == 1 {
		return d, nil
	}
	d.rules, d.n = strings.Join(rules, ", "), len(terms)
	pq, err := prepare(ctx, c, store, ast.ArrayTerm(terms...))
	if err != nil {
		return d, fmt.Errorf("preparing %s: %w", d.rules, err)
	}
	d.query = &pq
	return d, nil
}

// zeroOrOne is [x | x := rule]: the value of rule in an array, empty when
// it is undefined. A field of claims is written [x | k := field; x :=
// claims[k]], which evaluates the same (k is bound before the reference is
// evaluated, so only the rules of that field run) but does not let the type
// checker reject a claims object without that field, which newClaims accepts.
func zeroOrOne(rule, field string) *ast.Term {
	x, k := ast.VarTerm("x"), ast.VarTerm("k")
	ref := ast.MustParseRef(rule)
	if field == "" {
		return ast.ArrayComprehensionTerm(x, ast.NewBody(ast.Assign.Expr(x, ast.NewTerm(ref))))
	}
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
func (p *Policy) Revision() string { return p.revision }

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
