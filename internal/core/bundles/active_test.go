package bundles

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/regosched/regosched/internal/core/policy"
)

func TestActive(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	a, err := NewActive(reg)
	if err != nil {
		t.Fatalf("NewActive() error = %v", err)
	}
	first := mustDefaultPolicy(t)
	second := compileFS(t, minimal())
	const header = `
# HELP regosched_policy_info The active policy bundle: 1 for its revision, absent before one is active.
# TYPE regosched_policy_info gauge
`
	steps := []struct {
		name   string
		store  *policy.Policy
		want   *policy.Policy
		metric string
	}{
		{name: "before Store", want: nil, metric: ""},
		{name: "first policy", store: first, want: first, metric: header + `regosched_policy_info{revision="default-1"} 1` + "\n"},
		{name: "swapped", store: second, want: second, metric: header + `regosched_policy_info{revision="` + second.Revision() + `"} 1` + "\n"},
		{name: "swapped back", store: first, want: first, metric: header + `regosched_policy_info{revision="default-1"} 1` + "\n"},
	}
	// Steps build on each other: they run in order, in one test.
	for _, s := range steps {
		if s.store != nil {
			a.Store(s.store)
		}
		if got := a.Load(); got != s.want {
			t.Errorf("%s: Load() = %p, want %p", s.name, got, s.want)
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(s.metric), "regosched_policy_info"); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	}

	if _, err := NewActive(reg); err == nil {
		t.Error("NewActive() twice on one registry: no error")
	}
}

// Readers always see a whole policy while it is swapped (run with -race).
func TestActiveConcurrentSwap(t *testing.T) {
	a, err := NewActive(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	policies := []*policy.Policy{mustDefaultPolicy(t), compileFS(t, minimal())}
	a.Store(policies[0])
	valid := map[string]bool{policies[0].Revision(): true, policies[1].Revision(): true}

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 1000 {
			a.Store(policies[i%2])
		}
	})
	errs := make(chan string, 4)
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				if rev := a.Load().Revision(); !valid[rev] {
					errs <- rev
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for rev := range errs {
		t.Errorf("Load() returned a policy of unknown revision %q", rev)
	}
}
