package policy

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// maxReportedTests bounds the failures named in a rejection.
const maxReportedTests = 5

// RunTests runs the *_test.rego modules of b against the whole bundle (as
// `opa test` would) and fails when any fails or errs. A bundle without tests
// passes. Tests are held to the builtins a policy may call, since they run
// inside the scheduler too.
func RunTests(ctx context.Context, b *bundle.Bundle) error {
	if !slices.ContainsFunc(b.Modules, func(m bundle.ModuleFile) bool { return IsTest(m.Path) }) {
		return nil
	}
	modules := make(map[string]*ast.Module, len(b.Modules))
	for _, m := range b.Modules {
		modules[m.Path] = m.Parsed
	}
	store := inmem.NewFromObject(b.Data)
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return fmt.Errorf("running policy tests: %w", err)
	}
	defer store.Abort(ctx, txn)
	// One test at a time: a reload runs next to live decisions and must not
	// take every core from them. Tests are held to the same builtins as the
	// policy, since they run inside the scheduler too.
	ch, err := tester.NewRunner().SetCompiler(newCompiler()).SetStore(store).SetModules(modules).SetParallel(1).RunTests(ctx, txn)
	if errs, ok := errors.AsType[ast.Errors](err); ok {
		return compileErrors("running policy tests", errs)
	}
	if err != nil {
		return fmt.Errorf("running policy tests: %w", err)
	}
	var failed []string
	total := 0
	for r := range ch {
		total++
		name := r.Package + "." + r.Name
		switch {
		case r.Error != nil:
			failed = append(failed, fmt.Sprintf("%s: error: %v", name, r.Error))
		case r.Fail:
			failed = append(failed, name+": failed")
		}
	}
	if len(failed) == 0 {
		return nil
	}
	sort.Strings(failed)
	shown := failed
	if len(shown) > maxReportedTests {
		shown = shown[:maxReportedTests]
	}
	return fmt.Errorf("policy tests: %d of %d failed: %w", len(failed), total, errors.New(strings.Join(shown, "; ")))
}

// IsTest reports whether a module path is a test (*_test.rego), for `opa
// test` and never evaluated for a decision.
func IsTest(p string) bool { return strings.HasSuffix(path.Base(p), "_test.rego") }
