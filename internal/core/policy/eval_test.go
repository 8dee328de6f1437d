package policy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// TestEvalStopsWhenCancelled: eval hands OPA its own cancellation (no
// goroutine per query), which must still stop a long evaluation when the
// request's context ends, and not start one on a context already done.
func TestEvalStopsWhenCancelled(t *testing.T) {
	// Nine million products, none negative: seconds of work in little
	// memory, unless cancelled.
	pq, err := rego.New(rego.Query("[1 | some i in numbers.range(1, 3000); some j in numbers.range(1, 3000); i * j < 0]")).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("cancelled during evaluation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := eval(ctx, pq, ast.NewObject())
		if !topdown.IsCancel(err) {
			t.Fatalf("eval() = %v, want OPA's cancellation error", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("eval() returned %v after the cancellation, want promptly", d)
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := eval(ctx, pq, ast.NewObject()); !errors.Is(err, context.Canceled) {
			t.Fatalf("eval() = %v, want context.Canceled", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := eval(ctx, pq, ast.NewObject()); !topdown.IsCancel(err) {
			t.Fatalf("eval() = %v, want OPA's cancellation error", err)
		}
	})
}
