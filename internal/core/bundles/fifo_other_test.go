//go:build !unix

package bundles

import "errors"

// mkfifo: named pipes in a directory are a Unix case.
func mkfifo(string) error { return errors.ErrUnsupported }
