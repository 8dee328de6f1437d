// Package regosched holds what the binary embeds: the default policy bundle
// in rego/, used when no --policy is given.
package regosched

import (
	"embed"
	"io/fs"
)

// The "all:" prefix keeps the bundle's .manifest, which a plain pattern skips.
//
//go:embed all:rego
var embedded embed.FS

// DefaultPolicy returns the default OPA bundle, rooted at its top directory.
func DefaultPolicy() fs.FS {
	sub, err := fs.Sub(embedded, "rego")
	if err != nil {
		panic(err) // the directory is embedded at build time: cannot happen
	}
	return sub
}
