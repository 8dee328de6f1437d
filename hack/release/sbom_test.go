package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-cmp/cmp"
)

// sbomFixture is a cut-down cyclonedx-gomod SBOM of regosched-scheduler.
const sbomFixture = `{
  "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
  "bomFormat": "CycloneDX",
  "specVersion": "1.6",
  "version": 1,
  "metadata": {
    "component": {
      "bom-ref": "pkg:golang/github.com/regosched/regosched/scheduler@v0.1.0?type=module#cmd/regosched-scheduler",
      "type": "application",
      "name": "github.com/regosched/regosched/scheduler",
      "version": "v0.1.0"
    }
  },
  "components": [
    {
      "bom-ref": "pkg:golang/github.com/regosched/regosched@v0.1.0?type=module",
      "type": "library",
      "name": "github.com/regosched/regosched",
      "version": "v0.1.0",
      "hashes": [{"alg": "SHA-256", "content": "48f5530923e2807a5ae1b30ca6fdde292409a530c59294c8e9bcb87e68a47707"}]
    },
    {
      "bom-ref": "pkg:golang/k8s.io/kubernetes@v1.37.2?type=module",
      "type": "library",
      "name": "k8s.io/kubernetes",
      "version": "v1.37.2",
      "hashes": [{"alg": "SHA-256", "content": "fd34d57496bc05136cc9bc301869e689892d1cd9545ed6ce431956a4704f2f7b"}]
    }
  ]
}`

// hashed lists the components of an SBOM that keep hashes.
func hashed(t *testing.T, b []byte) []string {
	t.Helper()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range *bom.Components {
		if c.Hashes != nil {
			out = append(out, c.Name)
		}
	}
	return out
}

func TestDropHashes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local []string
		want  []string
	}{
		{"the replaced root module", []string{"github.com/regosched/regosched"}, []string{"k8s.io/kubernetes"}},
		{"a module not in the SBOM", []string{"example.com/other"}, []string{"github.com/regosched/regosched", "k8s.io/kubernetes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := dropHashes([]byte(sbomFixture), tc.local)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, hashed(t, out)); diff != "" {
				t.Errorf("components with hashes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunSBOM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.cdx.json")
	if err := os.WriteFile(path, []byte(sbomFixture), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"sbom", "-local", "github.com/regosched/regosched", path}, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"k8s.io/kubernetes"}, hashed(t, b)); diff != "" {
		t.Errorf("components with hashes (-want +got):\n%s", diff)
	}
	// Done twice, the file stays the same: the release can be rerun.
	again, err := dropHashes(b, []string{"github.com/regosched/regosched"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(b), string(again)); diff != "" {
		t.Errorf("a second pass changed the SBOM (-first +second):\n%s", diff)
	}
}
