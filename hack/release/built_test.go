package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// TestBuiltImages checks the images make image wrote to $RELEASE_IMAGES:
// each layout's index and configs, the per-platform tarballs, and, for the
// host's platform, the binaries run from the unpacked root filesystem as the
// image's user. make image-test runs it.
func TestBuiltImages(t *testing.T) {
	dir := os.Getenv("RELEASE_IMAGES")
	if dir == "" {
		t.Skip("RELEASE_IMAGES is not set: run make image-test, which builds the images and sets it")
	}
	release := readVersionFile(t)
	for _, s := range []spec{specs()["regosched"], specs()["regosched-scheduler"]} {
		t.Run(s.name, func(t *testing.T) {
			idx, err := layoutImageIndex(filepath.Join(dir, s.name), release)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate.Index(idx); err != nil {
				t.Fatalf("the index does not validate: %v", err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(release, im.Annotations[labelVersion]); diff != "" {
				t.Errorf("index annotation %s (-want +got):\n%s", labelVersion, diff)
			}
			ranHere := false
			for _, desc := range im.Manifests {
				if desc.Platform == nil {
					t.Fatalf("manifest %s has no platform", desc.Digest)
				}
				p := *desc.Platform
				t.Run(p.OS+"_"+p.Architecture, func(t *testing.T) {
					img, err := idx.Image(desc.Digest)
					if err != nil {
						t.Fatal(err)
					}
					checkConfig(t, s, p, img, release)
					checkTarball(t, filepath.Join(dir, tarballName(s.name, release, p)), img)
					if p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
						return
					}
					ranHere = true
					root := unpack(t, img)
					checkRootFS(t, root)
					runAsImageUser(t, s, root, release)
				})
			}
			if !ranHere {
				t.Errorf("no %s/%s image in %s: the binaries were not run (include the host's platform in PLATFORMS)", runtime.GOOS, runtime.GOARCH, dir)
			}
		})
	}
}

// readVersionFile is the repository's VERSION, what every image must say.
func readVersionFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// layoutImageIndex is the index a layout names by version, as crane push
// reads it.
func layoutImageIndex(dir, version string) (v1.ImageIndex, error) {
	l, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read the OCI layout %s: %w", dir, err)
	}
	m, err := l.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read %s/index.json: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s/index.json has %d entries, want 1 (the multi-platform index)", dir, len(m.Manifests))
	}
	d := m.Manifests[0]
	if got := d.Annotations[refName]; got != version {
		return nil, fmt.Errorf("%s/index.json names its index %q, want %q", dir, got, version)
	}
	if !d.MediaType.IsIndex() {
		return nil, fmt.Errorf("%s/index.json holds a %s, want an image index", dir, d.MediaType)
	}
	idx, err := l.ImageIndex(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("open the index %s: %w", d.Digest, err)
	}
	return idx, nil
}

func checkConfig(t *testing.T, s spec, p v1.Platform, img v1.Image, release string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}); diff != "" {
		t.Errorf("config platform (-want +got):\n%s", diff)
	}
	type runConfig struct {
		User, WorkingDir string
		Entrypoint, Cmd  []string
	}
	want := runConfig{User: "65532:65532", WorkingDir: "/", Entrypoint: []string{"/" + s.name}, Cmd: s.cmd}
	got := runConfig{User: cf.Config.User, WorkingDir: cf.Config.WorkingDir, Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	labels := cf.Config.Labels
	created, err := time.Parse(time.RFC3339, labels[labelCreated])
	if err != nil {
		t.Errorf("label %s: %v", labelCreated, err)
	}
	if !created.Equal(cf.Created.Time) {
		t.Errorf("label %s is %s, the config's created %s", labelCreated, created, cf.Created.Time)
	}
	if labels[labelRevision] == "" {
		t.Errorf("label %s is empty", labelRevision)
	}
	wantLabels := map[string]string{
		labelTitle:       s.name,
		labelDescription: s.description,
		labelSource:      "https://github.com/regosched/regosched",
		labelVersion:     release,
		labelLicenses:    "Apache-2.0",
	}
	gotLabels := map[string]string{}
	for k := range wantLabels {
		gotLabels[k] = labels[k]
	}
	if diff := cmp.Diff(wantLabels, gotLabels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// checkTarball checks that the docker-load tarball of a platform holds the
// layout's image: the same config and layers (its manifest is Docker's own).
func checkTarball(t *testing.T, path string, img v1.Image) {
	t.Helper()
	tb, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	want, err := layerDigests(img)
	if err != nil {
		t.Fatal(err)
	}
	got, err := layerDigests(tb)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: config and layers (-want +got):\n%s", filepath.Base(path), diff)
	}
}

// layerDigests are an image's config digest, then its layers' digests.
func layerDigests(img v1.Image) ([]string, error) {
	c, err := img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("config digest: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("layers: %w", err)
	}
	out := []string{c.String()}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, fmt.Errorf("layer digest: %w", err)
		}
		out = append(out, d.String())
	}
	return out, nil
}

// unpack writes img's flattened filesystem into a fresh directory, with
// the modes and owners the image gives, and returns that directory.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir is 0700; the image's user must be able to walk its root.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := extractImage(img, dir); err != nil {
		t.Fatalf("unpack the image: %v", err)
	}
	return dir
}

// extractImage writes img's flattened filesystem under dir.
func extractImage(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	return extract(rc, dir, os.Geteuid() == 0)
}

// extract writes a tar stream of directories and regular files under dir
// through an os.Root, so that no entry can land outside it; owners are set
// only when chown is true (it needs root).
func extract(r io.Reader, dir string, chown bool) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the tar: %w", err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		mode := h.FileInfo().Mode()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("mkdir %s: %w", name, err)
			}
		case tar.TypeReg:
			if err := writeFile(root, name, tr); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected tar entry type %q", name, h.Typeflag)
		}
		if err := root.Chmod(name, mode&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid)); err != nil {
			return fmt.Errorf("chmod %s: %w", name, err)
		}
		if chown {
			if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
				return fmt.Errorf("chown %s: %w", name, err)
			}
		}
	}
}

func writeFile(root *os.Root, name string, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	return nil
}

// checkRootFS checks the files the binaries rely on: the user in
// /etc/passwd, CA certificates that parse, a sticky world-writable /tmp.
func checkRootFS(t *testing.T, root string) {
	t.Helper()
	users, err := os.ReadFile(filepath.Join(root, passwdPath))
	if err != nil {
		t.Fatal(err)
	}
	if !hasUser(users, "nonroot", "65532") {
		t.Errorf("/etc/passwd names no nonroot with uid 65532:\n%s", users)
	}
	ca, err := os.ReadFile(filepath.Join(root, caBundlePath))
	if err != nil {
		t.Fatal(err)
	}
	n, err := countCertificates(ca)
	if err != nil {
		t.Errorf("/%s: %v", caBundlePath, err)
	}
	if n < 100 {
		t.Errorf("/%s holds %d certificates, want the NSS roots (over 100)", caBundlePath, n)
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(ca) {
		t.Errorf("/%s: x509.CertPool takes no certificate from it", caBundlePath)
	}
	fi, err := os.Stat(filepath.Join(root, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fs.ModeDir|fs.ModeSticky|0o777, fi.Mode()); diff != "" {
		t.Errorf("/tmp mode (-want +got):\n%s", diff)
	}
}

// hasUser reports whether a passwd file has user with uid.
func hasUser(passwdFile []byte, user, uid string) bool {
	sc := bufio.NewScanner(bytes.NewReader(passwdFile))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) == 7 && f[0] == user && f[2] == uid {
			return true
		}
	}
	return false
}

// countCertificates parses every PEM block of a CA bundle.
func countCertificates(pemBytes []byte) (int, error) {
	n := 0
	for len(bytes.TrimSpace(pemBytes)) > 0 {
		var b *pem.Block
		b, pemBytes = pem.Decode(pemBytes)
		if b == nil {
			return n, fmt.Errorf("trailing bytes after %d certificates are not PEM", n)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return n, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		n++
	}
	return n, nil
}

// runAsImageUser runs the image's binary from its unpacked root, chrooted
// there as 65532:65532, and checks that it reports the release's version.
func runAsImageUser(t *testing.T, s spec, root, release string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running the binary chrooted into the image as 65532:65532 needs root; run make image-test as root (CI does)")
	}
	switch s.name {
	case "regosched":
		out := runChrooted(t, root, "/regosched", "version", "-o", "json")
		var info struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatalf("regosched version -o json is not JSON: %v\n%s", err, out)
		}
		if diff := cmp.Diff(release, info.Version); diff != "" {
			t.Errorf("regosched version -o json (-want +got):\n%s", diff)
		}
		out = runChrooted(t, root, "/regosched", "--version")
		if !strings.Contains(string(out), " "+release+" ") {
			t.Errorf("regosched --version does not name %s:\n%s", release, out)
		}
	case "regosched-scheduler":
		out := runChrooted(t, root, "/regosched-scheduler", "--version")
		kube, err := kubernetesVersion("../../scheduler/go.mod")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "regosched "+release+" ") {
			t.Errorf("regosched-scheduler --version: want regosched %s, then Kubernetes' line; got\n%s", release, out)
		}
		if diff := cmp.Diff("Kubernetes "+kube, lines[len(lines)-1]); diff != "" {
			t.Errorf("regosched-scheduler --version's Kubernetes line (-want +got):\n%s", diff)
		}
	default:
		t.Fatalf("no run check for %s", s.name)
	}
}

// runChrooted runs name inside root as the image's user, and returns its
// standard output; it fails the test on any exit but 0.
func runChrooted(t *testing.T, root, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/nonroot"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: nonrootUID, Gid: nonrootGID, Groups: []uint32{}},
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s (chrooted, as %d:%d): %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), nonrootUID, nonrootGID, err, out, stderr.Bytes())
	}
	return out
}

// kubernetesVersion is the k8s.io/kubernetes version a go.mod requires.
func kubernetesVersion(goMod string) (string, error) {
	b, err := os.ReadFile(goMod)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", goMod, err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s requires no k8s.io/kubernetes", goMod)
}
