package deploytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// leafKeys returns the dotted keys of values that a user sets as a whole:
// a scalar, a list, a mapping the schema leaves free (resources, labels,
// policyData) or an empty one (plugin.args); mappings the schema describes
// key by key are walked.
func leafKeys(values, schema map[string]any, prefix string) ([]string, error) {
	props, _ := schema["properties"].(map[string]any)
	var keys []string
	for k, v := range values {
		sub, ok := props[k].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("values.yaml key %s%s is not in values.schema.json", prefix, k)
		}
		m, isMap := v.(map[string]any)
		if _, described := sub["properties"]; isMap && len(m) > 0 && described {
			more, err := leafKeys(m, sub, prefix+k+".")
			if err != nil {
				return nil, err
			}
			keys = append(keys, more...)
			continue
		}
		keys = append(keys, prefix+k)
	}
	slices.Sort(keys)
	return keys, nil
}

var backticked = regexp.MustCompile("`([^`]*)`")

// readmeKeys returns the keys the first column of the README's "## Values"
// table names, each in backticks; a key that starts with "." continues the
// one before it (`image.repository`, `.tag` is image.tag).
func readmeKeys(readme string) ([]string, error) {
	_, table, ok := strings.Cut(readme, "\n## Values\n")
	if !ok {
		return nil, errors.New("no section ## Values")
	}
	if i := strings.Index(table, "\n## "); i >= 0 {
		table = table[:i]
	}
	var keys []string
	rows := 0
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| value ") || strings.HasPrefix(line, "| ---") {
			continue
		}
		rows++
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		last := ""
		for _, m := range backticked.FindAllStringSubmatch(first, -1) {
			key := m[1]
			if strings.HasPrefix(key, ".") {
				i := strings.LastIndex(last, ".")
				if i < 0 {
					return nil, fmt.Errorf("row %q: %s continues no dotted key", first, key)
				}
				key = last[:i] + key
			} else {
				last = key
			}
			keys = append(keys, key)
		}
	}
	if rows == 0 {
		return nil, errors.New("no rows in the table of ## Values")
	}
	slices.Sort(keys)
	return keys, nil
}

// The chart's README documents every value of values.yaml, and no value that
// values.yaml does not have: its Values table names each leaf key once.
func TestChartReadmeValues(t *testing.T) {
	root := repoRoot(t)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(root, ChartPath, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var values, schema map[string]any
	if err := yaml.Unmarshal(read("values.yaml"), &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	if err := json.Unmarshal(read("values.schema.json"), &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	want, err := leafKeys(values, schema, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readmeKeys(string(read("README.md")))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if dup := duplicates(got); len(dup) > 0 {
		t.Errorf("README.md documents %v more than once", dup)
	}
	if diff := cmp.Diff(want, slices.Compact(got)); diff != "" {
		t.Errorf("values documented in README.md (-values.yaml +README.md):\n%s", diff)
	}
}

func duplicates(sorted []string) []string {
	var out []string
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] && !slices.Contains(out, sorted[i]) {
			out = append(out, sorted[i])
		}
	}
	return out
}

func TestReadmeKeys(t *testing.T) {
	tests := []struct {
		name, readme string
		want         []string
		wantErr      string
	}{
		{
			name: "full and continued keys, other sections left out",
			readme: "# c\n\n## Values\n\n| value | default | what |\n| --- | --- | --- |\n" +
				"| `image.repository`, `.tag` | `x` | `not.a.key` |\n" +
				"| `a`, `b.c.d` / `.e` | | |\n\n## Other\n\n| `z` | | |\n",
			want: []string{"a", "b.c.d", "b.c.e", "image.repository", "image.tag"},
		},
		{name: "no section", readme: "# c\n", wantErr: "no section ## Values"},
		{name: "a continuation first", readme: "\n## Values\n\n| `.tag` | | |\n", wantErr: "continues no dotted key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readmeKeys(tt.readme)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeafKeys(t *testing.T) {
	schema := map[string]any{"properties": map[string]any{
		"a":    map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{}, "c": map[string]any{}}},
		"free": map[string]any{"type": "object"},
		"args": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{}}},
		"n":    map[string]any{},
	}}
	tests := []struct {
		name    string
		values  map[string]any
		want    []string
		wantErr string
	}{
		{
			name:   "walked, free and empty mappings",
			values: map[string]any{"a": map[string]any{"b": 1, "c": []any{}}, "free": map[string]any{"k": "v"}, "args": map[string]any{}, "n": nil},
			want:   []string{"a.b", "a.c", "args", "free", "n"},
		},
		{name: "a key the schema lacks", values: map[string]any{"a": map[string]any{"z": 1}}, wantErr: "a.z is not in values.schema.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := leafKeys(tt.values, schema, "")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
