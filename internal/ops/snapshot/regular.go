package snapshot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the errors of ReadRegular for a path that is
// not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the errors of ReadRegular for a file past its
// limit.
var ErrTooLarge = errors.New("more than the limit")

// ReadRegular reads the regular file at path whole, refusing any other
// kind of file and any file of more than limit bytes; what ("snapshot",
// "suite") begins its errors. A device such as /dev/zero would otherwise
// be read up to the limit, and a FIFO would block the open until a writer
// came.
func ReadRegular(what, path string, limit int64) ([]byte, error) {
	// Refused before the open, so that no device is opened at all; the
	// opened file is checked again below, which is what counts.
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: %w", what, path, notRegular(info.Mode()))
	}
	// O_NONBLOCK: a FIFO swapped in since the Stat must not block the
	// open; on a regular file it changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: %w", what, path, notRegular(info.Mode()))
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%s %s: %d bytes, %w of %d", what, path, info.Size(), ErrTooLarge, limit)
	}
	// One byte past the limit tells a file at the limit from one that
	// grew since the Stat.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s %s: %w of %d bytes", what, path, ErrTooLarge, limit)
	}
	return data, nil
}

// notRegular says what a file that is not a regular one is.
func notRegular(mode fs.FileMode) error {
	var kind string
	switch {
	case mode.IsDir():
		kind = "a directory"
	case mode&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		kind = "a socket"
	case mode&fs.ModeCharDevice != 0:
		kind = "a character device"
	case mode&fs.ModeDevice != 0:
		kind = "a block device"
	default:
		kind = fmt.Sprintf("a file of mode %s", mode)
	}
	return fmt.Errorf("%s, %w", kind, ErrNotRegular)
}
