package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
)

// PeerKeys evaluates the groups pod belongs to.
func (p *Policy) PeerKeys(ctx context.Context, pod *model.Pod) ([]string, error) {
	v, err := eval(ctx, p.keys, podInput(pod))
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", PeerKeysRule, err)
	}
	return decodeKeys(v)
}

// Describe evaluates the groups pod belongs to and its claims, in one pass.
// The claims are nil for a pod in no group: it is never anyone's peer.
func (p *Policy) Describe(ctx context.Context, pod *model.Pod) ([]string, *model.Claims, error) {
	return p.describe(ctx, &p.all, pod)
}

// DescribePending is Describe for the pending pod of a request: of the
// claims, only what it avoids (separate, spread), not its marks, which only
// its future peers read.
func (p *Policy) DescribePending(ctx context.Context, pod *model.Pod) ([]string, *model.Claims, error) {
	return p.describe(ctx, &p.asPending, pod)
}

// DescribePeer is Describe for a bound pod, as somebody's peer: of the
// claims, only its marks.
func (p *Policy) DescribePeer(ctx context.Context, pod *model.Pod) ([]string, *model.Claims, error) {
	return p.describe(ctx, &p.asPeer, pod)
}

func (p *Policy) describe(ctx context.Context, d *description, pod *model.Pod) ([]string, *model.Claims, error) {
	v, err := eval(ctx, *d.query, podInput(pod))
	if err != nil {
		return nil, nil, fmt.Errorf("evaluating %s: %w", d.rules, err)
	}
	arr, ok := v.(*ast.Array)
	if v == nil || !ok || arr.Len() != d.n {
		// Undefined peer_keys (the parts never are): no group.
		return nil, nil, nil
	}
	keys, err := decodeKeys(arr.Elem(0).Value)
	if err != nil || len(keys) == 0 {
		return keys, nil, err
	}
	// part unwraps a part of claims: nil when not asked for or undefined.
	part := func(at int) *ast.Term {
		if at == 0 {
			return nil
		}
		if a, ok := arr.Elem(at).Value.(*ast.Array); ok && a.Len() == 1 {
			return a.Elem(0)
		}
		return nil
	}
	c, err := readClaims(p.origin, d.parts, part(d.marksAt), part(d.separateAt), part(d.spreadAt), part(d.capAt))
	if err != nil {
		return nil, nil, err
	}
	return keys, c, nil
}

// DescribeTimeout bounds each evaluation off the request path (a pod
// described by the informers, one at a time and once per pod at every
// policy reload, and Compile's own evaluations of a new bundle): a sane
// policy takes microseconds, so a few seconds fail only one that loops,
// which would otherwise hold up every later pod event behind it for good.
const DescribeTimeout = 3 * time.Second

// offRequest returns ctx cut short after p's DescribeTimeout.
func (p *Policy) offRequest(ctx context.Context) (context.Context, context.CancelFunc) {
	d := p.describeTimeout
	if d <= 0 { // not made by Compile
		d = DescribeTimeout
	}
	return context.WithTimeout(ctx, d)
}

// Describer adapts DescribePeer to the placement cache's KeyFunc, for the
// policy that current gives at each call. Each call is cut short after
// DescribeTimeout: the informer's context never ends.
func Describer(current func() *Policy) placement.KeyFunc {
	return func(ctx context.Context, pod *model.Pod) ([]string, *model.Claims, error) {
		p := current()
		if p == nil {
			return nil, nil, fmt.Errorf("describing pod %s: %w", pod.Key(), ErrNoPolicy)
		}
		ctx, cancel := p.offRequest(ctx)
		defer cancel()
		keys, c, err := p.DescribePeer(ctx, pod)
		if err != nil {
			return nil, nil, fmt.Errorf("describing pod %s: %w", pod.Key(), err)
		}
		return keys, c, nil
	}
}

// PendingDescriber adapts DescribePending to placement.Pending, for the
// policy that current gives at each call, which it names as the describer.
// Each call is cut short after DescribeTimeout, as Describer's. When watch
// is set, it also reports each pod that no hard rule protects.
func PendingDescriber(current func() *Policy, watch *UnprotectedWatch) placement.DescribeFunc {
	return func(ctx context.Context, pod *model.Pod) ([]string, *model.Claims, *model.Origin, error) {
		p := current()
		if p == nil {
			return nil, nil, nil, fmt.Errorf("describing pod %s: %w", pod.Key(), ErrNoPolicy)
		}
		dctx, cancel := p.offRequest(ctx)
		keys, c, err := p.DescribePending(dctx, pod)
		cancel()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("describing pod %s: %w", pod.Key(), err)
		}
		if watch != nil {
			watch.check(ctx, p, pod) // under a deadline of its own
		}
		return keys, c, p.origin, nil
	}
}

// ErrNoPolicy is returned while no policy is active: the one error every
// part of regosched gives for it (judge, decision, audit, serve's readiness).
var ErrNoPolicy = errors.New("no active policy")

func decodeKeys(v ast.Value) ([]string, error) {
	var keys []string
	err := forEach(v, func(t *ast.Term) error {
		s, ok := t.Value.(ast.String)
		if !ok {
			return fmt.Errorf("%s: key %v is not a string", PeerKeysRule, t)
		}
		keys = append(keys, string(s))
		return nil
	})
	return keys, err
}

// Protected reports whether the policy forbids evicting pod to make room
// for another (e.g. a Redis master). False when the bundle has no such rule.
func (p *Policy) Protected(ctx context.Context, pod *model.Pod) (bool, error) {
	if p.protected == nil {
		return false, nil
	}
	v, err := eval(ctx, *p.protected, podInput(pod))
	if err != nil {
		return false, fmt.Errorf("evaluating %s: %w", ProtectedRule, err)
	}
	switch b := v.(type) {
	case nil:
		return false, nil
	case ast.Boolean:
		return bool(b), nil
	default:
		return false, fmt.Errorf("%s: %v is not a boolean", ProtectedRule, v)
	}
}

// forEachObject visits the objects of rule's result v.
func forEachObject(v ast.Value, rule string, f func(*ast.Term, ast.Object) error) error {
	return forEach(v, func(t *ast.Term) error {
		o, ok := t.Value.(ast.Object)
		if !ok {
			return fmt.Errorf("%s: %v is not an object", rule, t)
		}
		return f(t, o)
	})
}

// forEach visits the members of a set or array; undefined (nil) is empty.
func forEach(v ast.Value, f func(*ast.Term) error) error {
	var err error
	visit := func(t *ast.Term) {
		if err == nil {
			err = f(t)
		}
	}
	switch x := v.(type) {
	case nil:
	case ast.Set:
		x.Foreach(visit)
	case *ast.Array:
		x.Foreach(visit)
	default:
		return fmt.Errorf("result %v is neither a set nor an array", v)
	}
	return err
}

func str(o ast.Object, key string) string {
	if t := o.Get(ast.StringTerm(key)); t != nil {
		if s, ok := t.Value.(ast.String); ok {
			return string(s)
		}
	}
	return ""
}
