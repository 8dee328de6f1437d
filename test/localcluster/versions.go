package localcluster

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// KubernetesEnv names the environment variable that picks the Kubernetes
// minor of the control plane Build compiles: unset (or empty) or the
// default module's minor builds deploy/local/tools/kubernetes, "1.36" builds
// deploy/local/tools/kubernetes-1.36, and so on for every kubernetes-<minor>
// tool module.
const KubernetesEnv = "REGOSCHED_KUBERNETES"

// defaultKubernetesDir is the tool module of the current Kubernetes minor;
// the modules of other minors are in kubernetes-<minor> folders beside it.
const defaultKubernetesDir = "kubernetes"

// kubernetesModule is a tool module under deploy/local/tools that builds the
// Kubernetes binaries.
type kubernetesModule struct {
	// Dir is its folder under deploy/local/tools, e.g. "kubernetes-1.36".
	Dir string
	// Version is the k8s.io/kubernetes version its go.mod requires, e.g.
	// "v1.36.3"; "" when it names none (only tests' fake modules).
	Version string
	// Minor is e.g. "1.36": from the folder name, or from Version for the
	// default module ("" when that is unknown).
	Minor string
	// Default marks the module Build uses unless told otherwise.
	Default bool
}

// String is e.g. "1.36 (deploy/local/tools/kubernetes-1.36, v1.36.3)".
func (m kubernetesModule) String() string {
	minor, version := cmp.Or(m.Minor, "?"), cmp.Or(m.Version, "version unknown")
	s := fmt.Sprintf("%s (%s/%s, %s", minor, toolsDir, m.Dir, version)
	if m.Default {
		s += ", the default"
	}
	return s + ")"
}

// kubernetesModules lists the Kubernetes tool modules under tools: the
// default one first, then every kubernetes-<minor> folder holding a go.mod,
// newest minor first. A module whose go.mod requires another minor than its
// folder says is an error, so that a copied folder cannot build the wrong
// version under the right name.
func kubernetesModules(tools string) ([]kubernetesModule, error) {
	def, err := readKubernetesModule(tools, defaultKubernetesDir)
	if err != nil {
		return nil, err
	}
	def.Default = true
	def.Minor = minorOf(def.Version)
	mods := []kubernetesModule{def}

	entries, err := os.ReadDir(tools)
	if err != nil {
		return nil, fmt.Errorf("listing tool modules: %w", err)
	}
	var others []kubernetesModule
	for _, e := range entries {
		minor, ok := strings.CutPrefix(e.Name(), defaultKubernetesDir+"-")
		if !ok || !e.IsDir() || !fileExists(filepath.Join(tools, e.Name(), "go.mod")) {
			continue
		}
		m, err := readKubernetesModule(tools, e.Name())
		if err != nil {
			return nil, err
		}
		m.Minor = minor
		if got := minorOf(m.Version); m.Version != "" && got != minor {
			return nil, fmt.Errorf("tool module %s/%s requires k8s.io/kubernetes %s, not a %s release", toolsDir, m.Dir, m.Version, minor)
		}
		others = append(others, m)
	}
	slices.SortFunc(others, func(a, b kubernetesModule) int { return newerFirst(a.Minor, b.Minor) })
	return append(mods, others...), nil
}

// readKubernetesModule reads the k8s.io/kubernetes requirement of the module
// in tools/dir.
func readKubernetesModule(tools, dir string) (kubernetesModule, error) {
	version, err := requiredVersion(filepath.Join(tools, dir, "go.mod"), "k8s.io/kubernetes")
	if err != nil {
		return kubernetesModule{}, fmt.Errorf("reading tool module %s: %w", dir, err)
	}
	return kubernetesModule{Dir: dir, Version: version}, nil
}

// selectKubernetes returns the module of minor want, the default one when
// want is empty, and otherwise an error listing what exists.
func selectKubernetes(mods []kubernetesModule, want string) (kubernetesModule, error) {
	for _, m := range mods {
		if want == "" && m.Default || want != "" && m.Minor == want {
			return m, nil
		}
	}
	names := make([]string, len(mods))
	for i, m := range mods {
		names[i] = m.String()
	}
	return kubernetesModule{}, fmt.Errorf("%s=%q: no tool module builds that Kubernetes minor; there are %s; unset %s for the default",
		KubernetesEnv, want, strings.Join(names, ", "), KubernetesEnv)
}

// requiredVersion returns the version of module path that the go.mod file
// at gomod requires, or "" if it requires none. A plain scan is enough for
// the tool modules' go.mod files, and keeps golang.org/x/mod out of the
// project's go.mod.
func requiredVersion(gomod, path string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	inRequire := false
	for s.Scan() {
		line := s.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case inRequire && fields[0] == ")":
			inRequire = false
			continue
		case fields[0] == "require" && len(fields) == 2 && fields[1] == "(":
			inRequire = true
			continue
		case fields[0] == "require":
			fields = fields[1:]
		case !inRequire:
			continue
		}
		if len(fields) >= 2 && strings.Trim(fields[0], `"`) == path {
			return fields[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", gomod, err)
	}
	return "", nil
}

// minorOf returns "1.36" for "v1.36.3", and "" for anything that is not a
// vMAJOR.MINOR.PATCH version.
func minorOf(version string) string {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if !strings.HasPrefix(version, "v") || len(parts) != 3 {
		return ""
	}
	for _, p := range parts[:2] {
		if _, err := strconv.Atoi(p); err != nil {
			return ""
		}
	}
	return parts[0] + "." + parts[1]
}

// newerFirst orders "1.36" before "1.9"; names that are not MAJOR.MINOR
// sort after those that are, by text.
func newerFirst(a, b string) int {
	na, errA := minorNumbers(a)
	nb, errB := minorNumbers(b)
	switch {
	case errA != nil && errB != nil:
		return strings.Compare(a, b)
	case errA != nil:
		return 1
	case errB != nil:
		return -1
	}
	return cmp.Or(cmp.Compare(nb[0], na[0]), cmp.Compare(nb[1], na[1]))
}

func minorNumbers(minor string) ([2]int, error) {
	major, rest, ok := strings.Cut(minor, ".")
	if !ok {
		return [2]int{}, errors.New("no dot")
	}
	x, err := strconv.Atoi(major)
	if err != nil {
		return [2]int{}, err
	}
	y, err := strconv.Atoi(rest)
	if err != nil {
		return [2]int{}, err
	}
	return [2]int{x, y}, nil
}

// KwokVersion is the sigs.k8s.io/kwok release BuildKwok installs, the one
// place it is pinned: kwok is a Go module of its own, so it never enters
// the project's go.mod, and its binary is cached per version (kwokKey).
const KwokVersion = "v0.8.0"
