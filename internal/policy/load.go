package policy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// Load reads an OPA bundle from a directory or a .tar.gz file. Test files
// (*_test.rego) are left out: they are for `opa test`, not for decisions.
func Load(path string) (*bundle.Bundle, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle: %w", err)
	}
	var loader bundle.DirectoryLoader
	if info.IsDir() {
		loader = bundle.NewDirectoryLoader(path)
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("reading policy bundle: %w", err)
		}
		defer func() { _ = f.Close() }()
		loader = bundle.NewTarballLoaderWithBaseURL(f, path)
	}
	return read(loader.WithFilter(skipTests), path)
}

// LoadFS reads an OPA bundle from the root of fsys (the policy embedded in the
// binary, or a test fixture).
func LoadFS(fsys fs.FS, name string) (*bundle.Bundle, error) {
	loader, err := bundle.NewFSLoader(fsys)
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle %s: %w", name, err)
	}
	return read(loader.WithFilter(skipTests), name)
}

func read(loader bundle.DirectoryLoader, name string) (*bundle.Bundle, error) {
	return readLimited(loader, name, DefaultBundleSizeLimit, nil)
}

func skipTests(abspath string, info fs.FileInfo, _ int) bool {
	return !info.IsDir() && strings.HasSuffix(filepath.Base(abspath), "_test.rego")
}
