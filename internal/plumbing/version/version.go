// Package version says which build of regosched is running: the release
// version (the repository's VERSION file, embedded), the commit it was built
// from, the Go version, and the Kubernetes API version its client speaks.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/regosched/regosched"
)

// commit is set by release builds with -ldflags "-X
// github.com/regosched/regosched/internal/plumbing/version.commit=SHA", because
// -trimpath builds from a tarball carry no VCS stamp; builds from a Git
// checkout take it from the Go toolchain's own stamp instead.
var commit = ""

// Info is what `regosched version` prints.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Modified is true when the build's checkout had uncommitted changes.
	Modified   bool   `json:"modified,omitempty"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
	Kubernetes string `json:"kubernetes"`
}

// Get reads the running binary's build.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return read(bi)
}

// read fills Info from a build's stamp; bi is nil when the binary has none.
// Test binaries carry no dependencies in theirs.
func read(bi *debug.BuildInfo) Info {
	info := Info{
		Version:    regosched.Version(),
		Commit:     commit,
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
		Kubernetes: "unknown",
	}
	if bi == nil {
		if info.Commit == "" {
			info.Commit = "unknown"
		}
		return info
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if info.Commit == "" {
				info.Commit = s.Value
			}
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	for _, dep := range bi.Deps {
		if dep.Path == "k8s.io/client-go" {
			info.Kubernetes = KubernetesMinor(dep.Version)
		}
	}
	return info
}

// KubernetesMinor turns a client-go module version (v0.37.2) into the
// Kubernetes release it belongs to (1.37), the API version it speaks.
func KubernetesMinor(clientGo string) string {
	parts := strings.SplitN(strings.TrimPrefix(clientGo, "v"), ".", 3)
	if len(parts) < 2 || parts[0] != "0" {
		return "unknown"
	}
	return "1." + parts[1]
}

// String is the one-line form, as kubectl and helm print theirs.
func (i Info) String() string {
	c := i.Commit
	if i.Modified {
		c += "-dirty"
	}
	return fmt.Sprintf("regosched %s (commit %s, %s, %s, Kubernetes API %s)", i.Version, c, i.GoVersion, i.Platform, i.Kubernetes)
}
