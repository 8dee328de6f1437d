//go:build unix

package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/test/timebox"
)

// refuseTimeout bounds a refusal: reading /dev/zero up to the default
// limit, or an open blocked on a FIFO, takes far longer.
const refuseTimeout = 5 * time.Second

// TestLoadFileNotRegular shows that only a regular file is read as a
// snapshot, and at most its limit: a device, a FIFO or a directory is
// refused before it is read, and fast.
func TestLoadFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	const node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
	if err := os.WriteFile(big, []byte(node), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock.yaml")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		limits     Limits
		want       string
	}{
		{name: "/dev/zero", path: "/dev/zero", want: "snapshot /dev/zero: a character device, not a regular file"},
		{name: "a symlink to /dev/zero", path: link, want: "snapshot " + link + ": a character device, not a regular file"},
		{name: "a FIFO", path: fifo, want: "snapshot " + fifo + ": a named pipe (FIFO), not a regular file"},
		{name: "a socket", path: sock, want: "snapshot " + sock + ": a socket, not a regular file"},
		{name: "a directory", path: dir, want: "snapshot " + dir + ": a directory, not a regular file"},
		{name: "a regular file past the limit", path: big, limits: Limits{MaxBytes: 10},
			want: fmt.Sprintf("snapshot %s: %d bytes, more than the limit of 10", big, len(node))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := timebox.Call(t, refuseTimeout, func() (*Snapshot, error) { return LoadFile(tt.path, tt.limits) })
			var got string
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
