package verify

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedSuites runs testdata/suites, the default policy's suites, and
// checks that every preset of testdata/presets (the label sets of real
// charts and operators) has one of its name: a preset added without a
// suite fails here.
func TestShippedSuites(t *testing.T) {
	suites, err := Discover([]string{"../../../testdata/suites"})
	if err != nil {
		t.Fatal(err)
	}
	presets, err := filepath.Glob("../../../testdata/presets/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(presets) == 0 {
		t.Fatal("no preset in testdata/presets")
	}
	byName := map[string]*Suite{}
	for _, s := range suites {
		byName[s.Name()] = s
	}
	for _, p := range presets {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		if byName[name] == nil {
			t.Errorf("preset %s has no suite named %s in testdata/suites", p, name)
		}
	}
	r, err := Run(context.Background(), suites, Options{Policy: defaultPolicy(t), PolicySource: "embedded", Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Suites {
		t.Run(s.Name, func(t *testing.T) {
			if s.Error != "" {
				t.Fatalf("%s cannot run: %s", s.File, s.Error)
			}
			if len(s.Cases) == 0 {
				t.Errorf("%s ran no case", s.File)
			}
			for _, c := range s.Cases {
				if c.Error != "" {
					t.Errorf("%s: case %q cannot run: %s", s.File, c.Name, c.Error)
				}
				for _, k := range c.Checks {
					if !k.Passed {
						t.Errorf("%s: case %q: %s\n  want: %s\n  got:  %s", s.File, c.Name, k.Name, k.Want, k.Got)
					}
				}
			}
		})
	}
}
