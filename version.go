package regosched

import (
	_ "embed"
	"strings"
)

// versionFile is the one place the release version is written: both
// binaries embed it, and the Makefile stamps it into the images and the chart.
//
//go:embed VERSION
var versionFile string

// Version returns the release version of this source tree, as in VERSION.
func Version() string {
	return strings.TrimSpace(versionFile)
}
