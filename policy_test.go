package regosched_test

import (
	"context"
	"io/fs"
	"testing"

	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/regosched/regosched"
)

// TestRego runs the Rego unit tests of rego/ (the same as `opa test rego/`)
// and checks that they cover the default policy.
func TestRego(t *testing.T) {
	ctx := context.Background()
	modules, store, err := tester.Load([]string{"rego"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cov := cover.New()
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Abort(ctx, txn)
	ch, err := tester.NewRunner().SetStore(store).SetModules(modules).SetCoverageQueryTracer(cov).RunTests(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range ch {
		n++
		t.Run(r.Package+"."+r.Name, func(t *testing.T) {
			switch {
			case r.Error != nil:
				t.Errorf("error: %v", r.Error)
			case r.Fail:
				t.Error("failed")
			case r.Skip:
				t.Skip("todo_test_")
			}
		})
	}
	if n == 0 {
		t.Fatal("no Rego test found in rego/")
	}
	report := cov.Report(modules)
	if report.Coverage < 90 {
		t.Errorf("Rego test coverage = %.1f%%, want >= 90%%", report.Coverage)
	}
	t.Logf("%d Rego tests, coverage %.1f%%", n, report.Coverage)
}

// TestDefaultPolicyEmbedded checks the binary carries the bundle's manifest and data.
func TestDefaultPolicyEmbedded(t *testing.T) {
	for _, name := range []string{".manifest", "regosched/config/data.json", "regosched/claims.rego"} {
		if _, err := fs.Stat(regosched.DefaultPolicy(), name); err != nil {
			t.Errorf("embedded policy lacks %s: %v", name, err)
		}
	}
}
