package bundles

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/internal/core/policy"
)

// watchCopy runs a Watcher over a copy of the default policy at revision
// v1, active; it returns the copy, the Active and the revisions activated.
func watchCopy(t *testing.T) (string, *Active, <-chan string) {
	t.Helper()
	dir := copyPolicy(t, false)
	manifest(t, dir, "v1")
	active, activated := watch(t, dir)
	return dir, active, activated
}

// watch runs a Watcher over the bundle at path (a directory or .tar.gz)
// until the test ends, with that bundle active; it returns the Active and
// the revisions activated.
func watch(t *testing.T, path string) (*Active, <-chan string) {
	t.Helper()
	// Taken before loading, as serve does: Run may start only after a
	// change, which must still count as a change.
	loadedFP, err := Fingerprint(path)
	if err != nil {
		t.Fatal(err)
	}
	first, err := Options{}.Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	active, err := NewActive(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	active.Store(first)
	activated := make(chan string, 10)
	log, _ := logtest.NewNullLogger()
	w := &Watcher{Path: path, Interval: 20 * time.Millisecond, Active: active, Log: log, Loaded: loadedFP,
		Activate: func(_ context.Context, p *policy.Policy, store func()) { store(); activated <- p.Revision() }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return active, activated
}

func TestWatcherSwapsGoodBundlesOnly(t *testing.T) {
	dir, active, activated := watchCopy(t)
	ctx := t.Context()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}

	// A good change is loaded and activated.
	manifest(t, dir, "v2")
	waitFor("revision v2", func() bool { return active.Status().Revision == "v2" })
	if got := <-activated; got != "v2" {
		t.Errorf("Activate got %q, want v2", got)
	}

	// A syntax error never replaces the active policy; the failure is shown.
	broken := filepath.Join(dir, "regosched", "broken.rego")
	if err := os.WriteFile(broken, []byte("package regosched.broken\n\nx := {"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("the failure to be recorded", func() bool { return active.Status().LastError != "" })
	st := active.Status()
	if st.Revision != "v2" || !strings.Contains(st.LastError, "broken.rego") {
		t.Errorf("Status() = %+v, want revision v2 and an error naming broken.rego", st)
	}
	if got := testutil.ToFloat64(active.reloads.WithLabelValues("failure")); got != 1 {
		t.Errorf("reloads{failure} = %v, want 1 (reported once, not at every poll)", got)
	}

	// Fixing it loads the next revision and clears the error.
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	manifest(t, dir, "v3")
	waitFor("revision v3", func() bool { return active.Status().Revision == "v3" })
	if st := active.Status(); st.LastError != "" {
		t.Errorf("LastError = %q after a good bundle, want empty", st.LastError)
	}
	// The counter follows the swap that Status shows: wait for it.
	waitFor("reloads{success} = 2", func() bool { return testutil.ToFloat64(active.reloads.WithLabelValues("success")) == 2 })
}

// Data that breaks the schema (a misspelt key) is refused on the same path
// as a broken module: the active policy stays and the status names the key.
func TestWatcherRefusesInvalidData(t *testing.T) {
	dir, active, _ := watchCopy(t)
	ctx := t.Context()

	dataFile := filepath.Join(dir, "regosched", "config", "data.json")
	raw, err := os.ReadFile(dataFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dataFile, []byte(strings.Replace(string(raw), `"zone_label"`, `"zone_lable"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest(t, dir, "v2")
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return active.Status().LastError != "", nil })
	if err != nil {
		t.Fatal("the invalid data was never reported")
	}
	st := active.Status()
	if st.Revision != "v1" || !strings.Contains(st.LastError, "Additional property zone_lable is not allowed") {
		t.Errorf("Status() = %+v, want revision v1 and an error naming zone_lable", st)
	}
}
