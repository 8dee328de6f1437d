package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	gocmp "github.com/google/go-cmp/cmp"
)

func TestCompileRejectsBrokenBundles(t *testing.T) {
	tests := []struct {
		bundle string
		// want are parts of the error that say what is wrong.
		want []string
	}{
		{"syntax-error", []string{"keys.rego", "rego_parse_error"}},
		{"missing-peer-keys", []string{"policy defines no rule data.regosched.peer_keys"}},
		{"missing-claims", []string{"policy defines no rule data.regosched.claims"}},
		{"eval-conflict", []string{
			"evaluating policy on a sample pod",
			"evaluating data.regosched.peer_keys, data.regosched.claims.marks, data.regosched.claims.separate, data.regosched.claims.spread",
			"eval_conflict_error: rule data.regosched.limits.limit produced conflicting values",
		}},
		{"claims-conflict", []string{
			"evaluating policy on a sample pod",
			"evaluating data.regosched.peer_keys, data.regosched.claims.marks",
			"eval_conflict_error",
		}},
		{"non-string-keys", []string{
			"evaluating policy on a sample pod",
			"data.regosched.peer_keys: key 6 is not a string",
		}},
		{"separate-without-rule", []string{
			"evaluating policy on a sample pod",
			"data.regosched.claims separate:",
			"needs a string mark and rule",
		}},
		{"negative-weight", []string{
			"evaluating policy on a sample pod",
			"data.regosched.claims spread: weight of",
			"is not a non-negative number",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.bundle, func(t *testing.T) {
			_, err := compileDir(filepath.Join("..", "..", "..", "testdata", "policy", tt.bundle))
			if err == nil {
				t.Fatal("bundle accepted, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestCompileRefusesRemovedRules: a bundle that still defines a pairwise
// rule is refused by name, so that nobody believes a rule regosched no
// longer evaluates protects them.
func TestCompileRefusesRemovedRules(t *testing.T) {
	tests := []struct {
		name string
		fsys fstest.MapFS
		// want is the error; "" accepts the bundle.
		want string
	}{
		{"filter.conflicts", with("regosched/filter.rego", `package regosched.filter

conflicts contains {"node": "n", "rule": "r"} if false
`), "policy defines data.regosched.filter.conflicts, which regosched no longer evaluates: say the rule with data.regosched.claims (see docs/policies.md)"},
		{"prioritize.penalties", with("regosched/prioritize.rego", `package regosched.prioritize

penalties := set()
`), "policy defines data.regosched.prioritize.penalties, which regosched no longer evaluates: say the rule with data.regosched.claims (see docs/policies.md)"},
		{"facts", with("regosched/facts.rego", `package regosched

facts := {"app": input.pod.labels.app}
`), "policy defines data.regosched.facts, which regosched no longer evaluates: say the rule with data.regosched.claims (see docs/policies.md)"},
		{"conflicts as a package of rules", with("regosched/filter.rego", `package regosched.filter.conflicts

redis := set()
`), "policy defines data.regosched.filter.conflicts, which regosched no longer evaluates: say the rule with data.regosched.claims (see docs/policies.md)"},
		{"a pairwise bundle without claims is told about its rule", fstest.MapFS{
			"regosched/keys.rego": {Data: []byte("package regosched\n\npeer_keys contains \"all\"\n")},
			"regosched/filter.rego": {Data: []byte(`package regosched.filter

conflicts contains {"node": peer.node, "rule": "r"} if some peer in input.peers
`)},
		}, "policy defines data.regosched.filter.conflicts, which regosched no longer evaluates: say the rule with data.regosched.claims (see docs/policies.md)"},
		{"no claims", fstest.MapFS{
			"regosched/keys.rego": {Data: []byte("package regosched\n\npeer_keys contains \"all\"\n")},
		}, "policy defines no rule data.regosched.claims"},
		{"other rules of those packages", with("regosched/filter.rego", `package regosched.filter

limit := 2
`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(context.Background(), readFS(t, tt.fsys, false))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Compile() error = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRevision(t *testing.T) {
	base := compileFS(t, minimal()).Revision()
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+16 {
		t.Fatalf("Revision() without manifest = %q, want sha256: and 16 hex digits", base)
	}
	tests := []struct {
		name     string
		fsys     fstest.MapFS
		wantSame bool
	}{
		{"same content", minimal(), true},
		{"manifest without revision", with(".manifest", `{"roots": ["regosched"]}`), true},
		{"changed module", with("regosched/keys.rego", "package regosched\n\npeer_keys contains \"all\"\n"), false},
		{"added module", with("regosched/extra.rego", "package regosched.extra\n\nx := 1\n"), false},
		{"changed data", with("regosched/config/data.json", `{"weight": 2}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compileFS(t, tt.fsys).Revision()
			if !strings.HasPrefix(got, "sha256:") {
				t.Errorf("Revision() = %q, want a sha256: digest", got)
			}
			if same := got == base; same != tt.wantSame {
				t.Errorf("Revision() = %q, base %q: same = %v, want %v", got, base, same, tt.wantSame)
			}
		})
	}

	t.Run("manifest revision wins", func(t *testing.T) {
		p := compileFS(t, with(".manifest", `{"revision": "v42", "roots": ["regosched"]}`))
		if got := p.Revision(); got != "v42" {
			t.Errorf("Revision() = %q, want %q", got, "v42")
		}
		if got := p.Origin().Revision; got != "v42" {
			t.Errorf("Origin().Revision = %q, want %q", got, "v42")
		}
	})

	// The digest covers content, not where the bundle lies.
	t.Run("same content in two directories", func(t *testing.T) {
		var revs []string
		for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "elsewhere")} {
			for name, f := range minimal() {
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p, err := compileDir(dir)
			if err != nil {
				t.Fatalf("Compile() error = %v", err)
			}
			revs = append(revs, p.Revision())
		}
		if diff := gocmp.Diff([]string{base, base}, revs); diff != "" {
			t.Errorf("revisions mismatch (-want +got):\n%s", diff)
		}
	})

	// Claims are told apart by the policy that made them, not its revision.
	t.Run("one bundle compiled twice", func(t *testing.T) {
		a, b := compileFS(t, minimal()), compileFS(t, minimal())
		if a.Revision() != b.Revision() || a.Origin() == b.Origin() {
			t.Errorf("revisions %q and %q, origins %p and %p: want one revision, two origins", a.Revision(), b.Revision(), a.Origin(), b.Origin())
		}
	})
}
