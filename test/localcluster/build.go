package localcluster

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// ModulePath is the module path FindRepoRoot looks for.
const ModulePath = "github.com/regosched/regosched"

// toolsDir holds the tool modules, relative to the repository root: etcd,
// kubernetes (the current minor) and kubernetes-<minor> (older ones; see
// KubernetesEnv). They are separate modules so that k8s.io/kubernetes and
// etcd never enter the project's own go.mod.
const toolsDir = "deploy/local/tools"

// toolModuleFiles are hashed into the cache key, so that bumping a version in
// either tool module, or picking another Kubernetes module (kubeDir), builds
// a fresh set of binaries in a new folder.
func toolModuleFiles(kubeDir string) []string {
	return []string{"etcd/go.mod", "etcd/go.sum", kubeDir + "/go.mod", kubeDir + "/go.sum"}
}

// BuildOptions configures Build.
type BuildOptions struct {
	// RepoRoot is the checkout holding deploy/local/tools; FindRepoRoot is
	// used when empty.
	RepoRoot string
	// CacheDir is where binaries are kept between runs; DefaultCacheDir is
	// used when empty.
	CacheDir string
	// Kubernetes is the Kubernetes minor to build, e.g. "1.36"; when empty,
	// $REGOSCHED_KUBERNETES (KubernetesEnv) says, and when that is empty
	// too, the default tool module (the current minor) is built.
	Kubernetes string
	// Log receives progress messages; nil discards them.
	Log logrus.FieldLogger
}

// Binaries holds the paths of the control plane executables.
type Binaries struct {
	Etcd                  string
	KubeAPIServer         string
	KubeScheduler         string
	KubeControllerManager string
	Kubectl               string
	// Kubernetes is the k8s.io/kubernetes version the Kubernetes binaries
	// were built from, e.g. "v1.36.3", for tests whose expectations depend
	// on it; "" when the tool module does not say.
	Kubernetes string
}

func binariesIn(dir string) Binaries {
	return Binaries{
		Etcd:                  filepath.Join(dir, "etcd"),
		KubeAPIServer:         filepath.Join(dir, "kube-apiserver"),
		KubeScheduler:         filepath.Join(dir, "kube-scheduler"),
		KubeControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Kubectl:               filepath.Join(dir, "kubectl"),
	}
}

// kubernetes returns the paths of the binaries built from k8s.io/kubernetes;
// each file is named after its command folder there.
func (b Binaries) kubernetes() []string {
	return []string{b.KubeAPIServer, b.KubeScheduler, b.KubeControllerManager, b.Kubectl}
}

// missingKubernetes returns the names of the Kubernetes binaries not in the
// cache yet, so that a cache folder from before a binary was added to the
// harness only builds that one.
func (b Binaries) missingKubernetes() []string {
	var names []string
	for _, p := range b.kubernetes() {
		if !fileExists(p) {
			names = append(names, filepath.Base(p))
		}
	}
	return names
}

// kubernetesPackages returns the k8s.io/kubernetes main packages of the
// named binaries.
func kubernetesPackages(names []string) []string {
	pkgs := make([]string, len(names))
	for i, name := range names {
		pkgs[i] = "k8s.io/kubernetes/cmd/" + name
	}
	return pkgs
}

// Build compiles etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager and kubectl from the tool modules under
// deploy/local/tools, unless a previous run already left them in the cache
// folder for the current module versions. Only the missing ones are built.
// The Kubernetes minor is BuildOptions.Kubernetes, else $REGOSCHED_KUBERNETES,
// else the default module's; each module has a cache folder of its own.
//
// A cold build takes minutes; later builds of a changed version reuse the Go
// build cache and mostly link. While a build runs, the log gets a line every
// progressInterval with the packages compiled so far against those to
// compile. Outside Linux it returns CheckOS's error at once, rather than
// build binaries that no cluster could run.
func Build(ctx context.Context, opts BuildOptions) (Binaries, error) {
	if err := CheckOS(); err != nil {
		return Binaries{}, err
	}
	log := orDiscard(opts.Log)

	root := opts.RepoRoot
	if root == "" {
		var err error
		if root, err = FindRepoRoot(); err != nil {
			return Binaries{}, err
		}
	}
	cacheDir := opts.CacheDir
	if cacheDir == "" {
		var err error
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return Binaries{}, err
		}
	}
	tools := filepath.Join(root, toolsDir)
	mods, err := kubernetesModules(tools)
	if err != nil {
		return Binaries{}, err
	}
	kube, err := selectKubernetes(mods, cmp.Or(opts.Kubernetes, os.Getenv(KubernetesEnv)))
	if err != nil {
		return Binaries{}, err
	}
	key, err := toolsKey(tools, kube.Dir)
	if err != nil {
		return Binaries{}, err
	}
	dir := filepath.Join(cacheDir, "bin-"+key[:16])
	bins := binariesIn(dir)
	bins.Kubernetes = kube.Version
	log = log.WithFields(logrus.Fields{"dir": dir, "kubernetes": cmp.Or(kube.Version, kube.Dir)})
	if !kube.Default {
		// Say it once up front: every later result depends on it.
		log.Infof("control plane of Kubernetes %s, not the default %s", kube.Minor, mods[0].Minor)
	}

	needEtcd := !fileExists(bins.Etcd)
	needKube := bins.missingKubernetes()
	if !needEtcd && len(needKube) == 0 {
		log.Debug("control plane binaries are cached")
		return bins, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("creating binary cache: %w", err)
	}
	unlock, err := lockBuilds(dir)
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	// Another process may have built them while this one waited.
	needEtcd, needKube = !fileExists(bins.Etcd), bins.missingKubernetes()
	if !needEtcd && len(needKube) == 0 {
		log.Debug("control plane binaries were built by another process meanwhile")
		return bins, nil
	}
	// Build next to the final folder (same file system) and rename each
	// binary into place: an interrupted build leaves only a temp folder
	// behind, never a truncated binary that a later run would trust.
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return Binaries{}, fmt.Errorf("creating build folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	tmpEtcd := binariesIn(tmp).Etcd

	var built []string
	if needEtcd {
		// etcd's server module is package main at its root, so the binary
		// would be called "v3" without an explicit name.
		if err := goBuild(ctx, log, filepath.Join(tools, "etcd"), "etcd",
			tmpEtcd, "go.etcd.io/etcd/server/v3"); err != nil {
			return Binaries{}, err
		}
		built = append(built, "etcd")
	}
	if len(needKube) > 0 {
		// One invocation for all of them: the go command then compiles the
		// packages they share once, in parallel.
		if err := goBuild(ctx, log, filepath.Join(tools, kube.Dir), strings.Join(needKube, ", "),
			tmp+string(filepath.Separator), kubernetesPackages(needKube)...); err != nil {
			return Binaries{}, err
		}
		built = append(built, needKube...)
	}
	for _, name := range built {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(dir, name)); err != nil {
			return Binaries{}, fmt.Errorf("moving %s into the cache: %w", name, err)
		}
	}
	return bins, nil
}

// goBuild runs "go build -v -o out pkgs..." in the module at dir, logging
// its progress; what names the binaries in the log.
func goBuild(ctx context.Context, log logrus.FieldLogger, dir, what, out string, pkgs ...string) error {
	start := time.Now()
	log = log.WithField("module", filepath.Base(dir))
	log.Infof("building %s (a cold build takes minutes): listing its packages", what)

	// Counting first costs a second or two (go list hashes the sources, as
	// go build will) and tells how many packages the build will compile.
	var deps []string
	expected := 0
	list, err := goCommand(ctx, dir, append([]string{"list", "-deps", "-f", listFormat}, pkgs...)...).Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		err = fmt.Errorf("go list: %w: %s", err, lastLines(string(exitErr.Stderr), 5))
	}
	if err == nil {
		deps, expected, err = parseGoList(string(list))
	}
	if err != nil {
		deps = nil
		log.WithError(err).Warn("counting the packages to compile failed; progress shows no total")
	}
	progress := newBuildProgress(log, what, deps, expected, start)
	log.Info(progress.message(time.Now()))

	cmd := goCommand(ctx, dir, append([]string{"build", "-v", "-o", out}, pkgs...)...)
	err = progress.run(cmd)
	if err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", dir, err, progress.output())
	}
	log.WithFields(logrus.Fields{
		"took":     time.Since(start).Round(time.Second),
		"compiled": progress.compiledCount(),
	}).Infof("built %s", what)
	return nil
}

// goCommand is "go args..." in the module at dir.
func goCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// A go.work above the checkout must not pull the tool modules into the
	// project's build list.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.SysProcAttr = ChildSysProcAttr()
	return cmd
}

// toolsKey hashes the go.mod and go.sum of the etcd tool module and of the
// Kubernetes one in kubeDir, plus the target platform, into a hex string.
// For the default module (kubernetes) it is the key of the folder binaries
// were cached in before other minors existed.
func toolsKey(tools, kubeDir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s/%s\n", runtime.GOOS, runtime.GOARCH)
	for _, name := range toolModuleFiles(kubeDir) {
		data, err := os.ReadFile(filepath.Join(tools, filepath.FromSlash(name)))
		if err != nil {
			return "", fmt.Errorf("hashing tool modules: %w", err)
		}
		// Length-prefix each file so that moving bytes from one file to
		// the next changes the key.
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// DefaultCacheDir returns $REGOSCHED_CACHE_DIR, else
// $XDG_CACHE_HOME/regosched, else $HOME/.cache/regosched.
func DefaultCacheDir() (string, error) {
	return cacheDirFromEnv(os.Getenv)
}

func cacheDirFromEnv(getenv func(string) string) (string, error) {
	if d := getenv("REGOSCHED_CACHE_DIR"); d != "" {
		return d, nil
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "regosched"), nil
	}
	if d := getenv("HOME"); d != "" {
		return filepath.Join(d, ".cache", "regosched"), nil
	}
	return "", errors.New("no cache folder: set REGOSCHED_CACHE_DIR, XDG_CACHE_HOME or HOME")
}

// FindRepoRoot walks up from the working directory to the folder whose
// go.mod declares ModulePath.
func FindRepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding repository root: %w", err)
	}
	return findRepoRoot(wd)
}

func findRepoRoot(start string) (string, error) {
	for dir := start; ; {
		mod, err := moduleName(filepath.Join(dir, "go.mod"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("finding repository root: %w", err)
		}
		if mod == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above %s", ModulePath, start)
		}
		dir = parent
	}
}

// moduleName returns the path on the module line of a go.mod file.
func moduleName(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", s.Err()
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func orDiscard(log logrus.FieldLogger) logrus.FieldLogger {
	if log != nil {
		return log
	}
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
