package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
)

// ValidateRule is optional: the set of errors of the bundle's data (the
// default policy checks data.regosched.config against its schema). A bundle
// with any is refused like one that does not compile.
const ValidateRule = "data.regosched.validate.errors"

// maxReportedDataErrors bounds the errors named in a rejection.
const maxReportedDataErrors = 10

// validateData evaluates ValidateRule once, cut short after timeout, and
// turns a non-empty answer into an error that names the mistakes.
func validateData(ctx context.Context, c *ast.Compiler, store storage.Store, timeout time.Duration) error {
	pq, err := prepare(ctx, c, store, ast.NewTerm(ast.MustParseRef(ValidateRule)))
	if err != nil {
		return fmt.Errorf("preparing %s: %w", ValidateRule, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := eval(ctx, pq, ast.NewObject())
	if err != nil {
		return fmt.Errorf("evaluating %s: %w", ValidateRule, err)
	}
	set, ok := v.(ast.Set)
	if v != nil && !ok {
		return fmt.Errorf("%s: want a set of strings, got %v", ValidateRule, ast.ValueName(v))
	}
	if set == nil || set.Len() == 0 {
		return nil
	}
	var msgs []string
	set.Foreach(func(t *ast.Term) {
		if s, ok := t.Value.(ast.String); ok {
			msgs = append(msgs, string(s))
		} else {
			msgs = append(msgs, t.String())
		}
	})
	sort.Strings(msgs)
	n := len(msgs)
	if n > maxReportedDataErrors {
		msgs = append(msgs[:maxReportedDataErrors], fmt.Sprintf("and %d more", n-maxReportedDataErrors))
	}
	return fmt.Errorf("policy data has %d error(s): %w", n, errors.New(strings.Join(msgs, "; ")))
}
