package regosched

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/rego"
)

// presetFixture is one file of testdata/presets: the pods a real chart or
// operator creates, with the exact labels it puts on them (source names the
// files they come from), and the workload entries each pod must belong to.
type presetFixture struct {
	Source []string `json:"source"`
	Notes  string   `json:"notes"`
	Pods   []struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Note      string            `json:"note"`
		Labels    map[string]string `json:"labels"`
		// Expect is data.regosched.workloads.entries(pod) without "kind".
		Expect map[string]presetMember `json:"expect"`
	} `json:"pods"`
}

type presetMember struct {
	Cluster string   `json:"cluster"`
	Shard   string   `json:"shard"`
	Roles   []string `json:"roles"`
}

// TestPresets checks that the default policy's workload entries match the
// pods of the charts and operators in testdata/presets as their fixtures say.
func TestPresets(t *testing.T) {
	ctx := context.Background()
	query := preparePresetQuery(ctx, t)

	files, err := filepath.Glob(filepath.Join("testdata", "presets", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixture in testdata/presets")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			fx := readPresetFixture(t, file)
			if len(fx.Source) == 0 {
				t.Error("the fixture names no source")
			}
			for _, s := range fx.Source {
				if strings.TrimSpace(s) == "" {
					t.Error("the fixture has an empty source")
				}
			}
			if len(fx.Pods) == 0 {
				t.Fatal("the fixture has no pod")
			}
			for i, p := range fx.Pods {
				t.Run(p.Name, func(t *testing.T) {
					pod := map[string]any{
						"name":      p.Name,
						"namespace": p.Namespace,
						"uid":       p.Namespace + "/" + p.Name,
						"labels":    p.Labels,
						"priority":  0,
						"node":      "",
					}
					got := presetEntries(ctx, t, query, pod)
					want := p.Expect
					if want == nil {
						want = map[string]presetMember{}
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("pods[%d] (%s) entries (-want +got):\n%s", i, p.Note, diff)
					}
				})
			}
		})
	}
}

func readPresetFixture(t *testing.T, file string) presetFixture {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var fx presetFixture
	if err := dec.Decode(&fx); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return fx
}

// preparePresetQuery compiles the embedded default bundle with the query
// for a pod's workload entries.
func preparePresetQuery(ctx context.Context, t *testing.T) rego.PreparedEvalQuery {
	t.Helper()
	loader, err := bundle.NewFSLoader(DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.NewCustomReader(loader).Read()
	if err != nil {
		t.Fatal(err)
	}
	q, err := rego.New(
		rego.ParsedBundle("default", &b),
		rego.Query("entries := data.regosched.workloads.entries(input.pod)"),
	).PrepareForEval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func presetEntries(ctx context.Context, t *testing.T, q rego.PreparedEvalQuery, pod map[string]any) map[string]presetMember {
	t.Helper()
	rs, err := q.Eval(ctx, rego.EvalInput(map[string]any{"pod": pod}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("entries: %d results, want 1", len(rs))
	}
	// Through JSON: sets come back as arrays, objects as maps.
	raw, err := json.Marshal(rs[0].Bindings["entries"])
	if err != nil {
		t.Fatal(err)
	}
	var entries map[string]struct {
		Kind string `json:"kind"`
		presetMember
	}
	if err := json.Unmarshal(raw, &entries); err != nil {
		t.Fatalf("entries %s: %v", raw, err)
	}
	got := make(map[string]presetMember, len(entries))
	for name, e := range entries {
		if e.Kind == "" {
			t.Errorf("entry %s has no kind", name)
		}
		sort.Strings(e.Roles)
		got[name] = e.presetMember
	}
	return got
}
