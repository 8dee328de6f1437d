package bundles

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"strings"
)

// DefaultBundleTotalLimit is the default of Options.TotalLimitBytes. A
// bundle takes far more memory parsed than on disk: 16 MiB of JSON data
// peaked at about 300 MiB of heap while loading and kept about 180 MiB
// (measured with OPA v1.22), and a reload holds the old policy and the new
// one together. 16 MiB keeps that inside a 512 MiB pod, with hundreds of
// times the size of a real policy bundle to spare. It is below the per-file
// default on purpose: that one also bounds a compressed download.
const DefaultBundleTotalLimit int64 = 16 << 20

// DefaultBundleMaxEntries is the default of Options.MaxEntries: hundreds of
// times the files of a real policy bundle, few enough that their per-file
// bookkeeping stays in megabytes (about 5,000 small data files, with their
// directories 10,000 entries, peaked at 10 MiB of heap).
const DefaultBundleMaxEntries = 10000

// totalLimit is TotalLimitBytes, or its default.
func (o Options) totalLimit() int64 {
	if o.TotalLimitBytes > 0 {
		return o.TotalLimitBytes
	}
	return DefaultBundleTotalLimit
}

// maxEntries is MaxEntries, or its default.
func (o Options) maxEntries() int {
	if o.MaxEntries > 0 {
		return o.MaxEntries
	}
	return DefaultBundleMaxEntries
}

// tally counts a bundle's entries and bytes as they are met, against the
// limits of the Options it was made from.
type tally struct {
	fileLimit, totalLimit int64
	maxEntries            int

	entries int
	bytes   int64
}

func (o Options) tally() *tally {
	return &tally{fileLimit: o.sizeLimit(), totalLimit: o.totalLimit(), maxEntries: o.maxEntries()}
}

// limitError is a bundle refused for one of the limits, as opposed to one
// that cannot be read (which OPA's loader reports in its own words).
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

func refuse(format string, a ...any) error { return &limitError{msg: fmt.Sprintf(format, a...)} }

// entry counts one entry (file, directory or other).
func (t *tally) entry() error {
	t.entries++
	if t.entries > t.maxEntries {
		return refuse("the bundle has more than %d entries (--policy-max-entries)", t.maxEntries)
	}
	return nil
}

// file counts a regular file of size bytes, before any of it is read.
func (t *tally) file(name string, size int64) error {
	if size > t.fileLimit {
		return refuse("file %s: %d bytes exceeds the limit of %d bytes per file (--policy-max-bytes)", name, size, t.fileLimit)
	}
	t.bytes += size
	if t.bytes > t.totalLimit {
		return refuse("file %s brings the bundle to %d bytes, which exceeds the limit of %d bytes for a whole bundle (--policy-max-total-bytes)",
			name, t.bytes, t.totalLimit)
	}
	return nil
}

// notFile refuses an entry that is neither a regular file nor a directory:
// OPA's loaders would skip links, devices and pipes silently (or, for a
// pipe on disk, block on it), and a sparse entry makes a few bytes of
// archive read as gigabytes.
func notFile(name, kind string) error {
	return refuse("entry %s is %s: a policy bundle holds only regular files and directories", name, kind)
}

// hasSparsePAX tells a GNU PAX sparse file: archive/tar reads it as a
// regular file whose holes it fills with zeros.
func hasSparsePAX(h *tar.Header) bool {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func tarKind(flag byte) string {
	switch flag {
	case tar.TypeSymlink:
		return "a symlink"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeChar:
		return "a character device"
	case tar.TypeBlock:
		return "a block device"
	case tar.TypeFifo:
		return "a named pipe"
	}
	return fmt.Sprintf("an entry of type %q", flag)
}

func modeKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "an irregular file (" + m.String() + ")"
}
