package policytest_test

import (
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/policy/policytest"
)

// TestWriteDir: a variant written as a bundle directory loads as regosched
// loads --policy, with the revision SetRevision gave it.
func TestWriteDir(t *testing.T) {
	tests := []struct {
		name, revision string
	}{
		{name: "stricter", revision: "stricter-1"},
		{name: "another revision", revision: "r2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := policytest.VariantFS(t, policytest.KeepClusterApart)
			policytest.SetRevision(t, fsys, tt.revision)
			dir := policytest.WriteDir(t, fsys, t.TempDir())
			p, err := bundles.Options{}.LoadFS(context.Background(), os.DirFS(dir), dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.revision, p.Revision()); diff != "" {
				t.Errorf("Revision() (-want +got):\n%s", diff)
			}
		})
	}
}
