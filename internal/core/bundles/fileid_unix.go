//go:build unix

package bundles

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileID is the device and inode of a file: a file replaced by a rename
// shows as another file even with the same size and modification time.
func fileID(info fs.FileInfo) string {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	}
	return ""
}
