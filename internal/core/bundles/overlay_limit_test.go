package bundles

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"
)

// hugeOverlay makes path a 1 GiB file that takes no disk space.
func hugeOverlay(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
}

// TestOverlayOverLimit: a --policy-data file over the limit is refused with
// a clear error, reading no more than the limit (a 1 GiB file, a 1 MiB
// limit), whether loaded or watched.
func TestOverlayOverLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data.json")
	hugeOverlay(t, file)
	opts := Options{DataFile: file, SizeLimitBytes: 1 << 20}
	var err error
	n := allocated(func() { _, err = opts.LoadFS(context.Background(), os.DirFS(defaultBundleDir), EmbeddedName) })
	wantAll(t, "LoadFS", err, "policy data overlay "+file+" is larger than 1048576 bytes")
	if n > bound {
		t.Errorf("LoadFS allocated %d bytes, want at most %d", n, bound)
	}
	if n := allocated(func() { _, err = WatchFingerprint("", file) }); n > 1<<20 {
		t.Errorf("WatchFingerprint allocated %d bytes, want at most 1 MiB", n)
	}
	if err != nil {
		t.Errorf("WatchFingerprint() = %v", err)
	}
}

// TestWatcherOverlayOverLimit: a watched overlay replaced by one over the
// limit is refused and reported; the last good policy stays.
func TestWatcherOverlayOverLimit(t *testing.T) {
	dir := t.TempDir()
	file := writeOverlay(t, dir, map[string]any{})
	opts := Options{DataFile: file, SizeLimitBytes: 1 << 20}
	fsys := os.DirFS(defaultBundleDir)
	first, err := opts.LoadFS(context.Background(), fsys, EmbeddedName)
	if err != nil {
		t.Fatal(err)
	}
	active, err := NewActive(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	active.Store(first)
	log, _ := logtest.NewNullLogger()
	w := &Watcher{FS: fsys, Interval: 20 * time.Millisecond, Options: opts, Active: active, Log: log}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(100 * time.Millisecond) // Run takes the first fingerprint

	n := allocated(func() {
		hugeOverlay(t, file)
		err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
			func(context.Context) (bool, error) { return active.Status().LastError != "", nil })
	})
	if err != nil {
		t.Fatal("the oversized overlay was never reported")
	}
	if n > bound {
		t.Errorf("allocated %d bytes, want at most %d", n, bound)
	}
	if st := active.Status(); !strings.Contains(st.LastError, "larger than 1048576 bytes") || active.Load() != first {
		t.Errorf("Status() = %+v, want the first policy kept and the limit named", st)
	}
}

// TestOverlayFingerprint: polling an unchanged overlay reads none of it; a
// change is seen, also when a ConfigMap volume swaps its ..data symlink to
// a file of the same size and modification time.
func TestOverlayFingerprint(t *testing.T) {
	// A ConfigMap volume: data.json -> ..data/data.json, ..data -> ..v1.
	dir := t.TempDir()
	version := func(name, content string, mtime time.Time) {
		t.Helper()
		p := filepath.Join(dir, name, "data.json")
		writeFile(t, p, content)
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	swap := func(name string) {
		t.Helper()
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	mtime := time.Now().Add(-time.Hour).Truncate(time.Second)
	big := strings.Repeat(" ", 8<<20) + "{}"
	version("..v1", big, mtime)
	swap("..v1")
	file := filepath.Join(dir, "data.json")
	if err := os.Symlink(filepath.Join("..data", "data.json"), file); err != nil {
		t.Fatal(err)
	}
	fp := func() string {
		t.Helper()
		f, err := WatchFingerprint("", file)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	first := fp()
	n := allocated(func() {
		for range 10 {
			if got := fp(); got != first {
				t.Errorf("fingerprint of an unchanged overlay changed: %q, then %q", first, got)
			}
		}
	})
	if n > 1<<20 {
		t.Errorf("10 polls of an unchanged 8 MiB overlay allocated %d bytes, want at most 1 MiB (none of it read)", n)
	}

	// Same size, same modification time, another file behind the symlink.
	version("..v2", strings.Repeat(" ", 8<<20)+"[]", mtime)
	swap("..v2")
	if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
		t.Fatal(err)
	}
	second := fp()
	if second == first {
		t.Error("fingerprint unchanged after the ConfigMap's ..data symlink moved to a new file")
	}
	// Rewritten in place.
	version("..v2", "{}", time.Now())
	if fp() == second {
		t.Error("fingerprint unchanged after the file was rewritten")
	}
}
