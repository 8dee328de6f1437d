//go:build unix

package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/ops/snapshot"
	"github.com/regosched/regosched/test/timebox"
)

// refuseTimeout bounds a refusal: reading /dev/zero up to a limit, or an
// open blocked on a FIFO, takes far longer.
const refuseTimeout = 5 * time.Second

// mustWrite writes data to path.
func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotConfined shows that a suite's snapshot is a regular file of
// the suite's directory tree, symlinks resolved, unless AllowOutsideSuite;
// a device, a FIFO or a directory is refused fast even then.
func TestSnapshotConfined(t *testing.T) {
	cluster, err := os.ReadFile(clusterSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "suites")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "cluster.yaml"), cluster)
	outside := filepath.Join(root, "outside.yaml")
	mustWrite(t, outside, cluster)
	for link, target := range map[string]string{"escape.yaml": "../outside.yaml", "alias.yaml": "cluster.yaml", "zero.yaml": "/dev/zero"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	const outsideErr = "outside the suite's directory; give --allow-outside-suite to read it"
	tests := []struct {
		name, snapshot string
		allowOutside   bool
		limits         snapshot.Limits
		// want is the suite's error; empty, the suite runs and passes.
		want string
	}{
		{name: "in the suite's directory", snapshot: "cluster.yaml"},
		{name: "a path that stays in the tree", snapshot: "sub/../cluster.yaml"},
		{name: "a symlink within the tree", snapshot: "alias.yaml"},
		{name: "a parent's file", snapshot: "../outside.yaml", want: "snapshot ../outside.yaml: " + outsideErr},
		{name: "a parent's file allowed", snapshot: "../outside.yaml", allowOutside: true},
		{name: "an absolute path", snapshot: outside, want: "snapshot " + outside + ": an absolute path, " + outsideErr},
		{name: "an absolute path allowed", snapshot: outside, allowOutside: true},
		{name: "a symlink out of the tree", snapshot: "escape.yaml", want: "snapshot escape.yaml: resolves to " + outside + ", " + outsideErr},
		{name: "a symlink out of the tree allowed", snapshot: "escape.yaml", allowOutside: true},
		{name: "/dev/zero", snapshot: "/dev/zero", want: "snapshot /dev/zero: an absolute path, " + outsideErr},
		{name: "/dev/zero allowed", snapshot: "/dev/zero", allowOutside: true, want: "snapshot /dev/zero: a character device, not a regular file"},
		{name: "a symlink to /dev/zero", snapshot: "zero.yaml", want: "snapshot zero.yaml: resolves to /dev/zero, " + outsideErr},
		{name: "a symlink to /dev/zero allowed", snapshot: "zero.yaml", allowOutside: true,
			want: "snapshot " + filepath.Join(dir, "zero.yaml") + ": a character device, not a regular file"},
		{name: "a FIFO", snapshot: "fifo.yaml", want: "snapshot " + filepath.Join(dir, "fifo.yaml") + ": a named pipe (FIFO), not a regular file"},
		{name: "a directory", snapshot: "sub", want: "snapshot " + filepath.Join(dir, "sub") + ": a directory, not a regular file"},
		{name: "a file past the limit", snapshot: "cluster.yaml", limits: snapshot.Limits{MaxBytes: 100},
			want: fmt.Sprintf("snapshot %s: %d bytes, more than the limit of 100", filepath.Join(dir, "cluster.yaml"), len(cluster))},
	}
	pol := defaultPolicy(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("suite-%d.yaml", i))
			mustWrite(t, path, []byte("apiVersion: regosched.io/v1alpha1\nkind: Suite\nsnapshot: "+tt.snapshot+"\naudit: {violations: []}\n"))
			suites, err := Discover([]string{path})
			if err != nil {
				t.Fatal(err)
			}
			r, err := timebox.Call(t, refuseTimeout, func() (*Report, error) {
				return Run(context.Background(), suites, Options{
					Policy: pol, AllowOutsideSuite: tt.allowOutside, Limits: tt.limits, Log: quietLog(),
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.Suites[0].Error); diff != "" {
				t.Errorf("suite error (-want +got):\n%s", diff)
			}
			if tt.want == "" && (!r.OK() || r.Passed == 0) {
				t.Errorf("the suite did not pass: %+v", r.Suites[0])
			}
		})
	}
}

// TestSuiteNotRegular shows that a suite is read from a regular file only,
// and at most MaxSuiteBytes, refused from its size before it is read.
func TestSuiteNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A FIFO among a directory's suites is refused too, not waited on.
	walked := filepath.Join(dir, "walked")
	if err := os.Mkdir(walked, 0o700); err != nil {
		t.Fatal(err)
	}
	walkedFIFO := filepath.Join(walked, "fifo.yaml")
	if err := syscall.Mkfifo(walkedFIFO, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the file claims more than the limit, without the disk.
	if err := f.Truncate(MaxSuiteBytes + 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{name: "/dev/zero", path: "/dev/zero", want: "suite /dev/zero: a character device, not a regular file"},
		{name: "a FIFO", path: fifo, want: "suite " + fifo + ": a named pipe (FIFO), not a regular file"},
		{name: "a FIFO in a directory", path: walked, want: "suites in " + walked + ": suite " + walkedFIFO + ": a named pipe (FIFO), not a regular file"},
		{name: "a file past the limit", path: big,
			want: fmt.Sprintf("suite %s: %d bytes, more than the limit of %d", big, MaxSuiteBytes+1, MaxSuiteBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := timebox.Call(t, refuseTimeout, func() ([]*Suite, error) { return Discover([]string{tt.path}) })
			var got string
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("a directory named as a suite file", func(t *testing.T) {
		_, err := LoadFile(dir)
		if diff := cmp.Diff("suite "+dir+": a directory, not a regular file", fmt.Sprint(err)); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})
}
