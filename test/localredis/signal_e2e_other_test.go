//go:build e2e && !linux

package localredis

import "errors"

// signalZero is Linux-only, like the processes it checks: outside Linux the
// suite stops at localcluster.CheckOS before any process starts.
func signalZero(int) error { return errors.ErrUnsupported }
