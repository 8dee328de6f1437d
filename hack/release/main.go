// Command release is the part of make release that needs Go libraries.
//
// image assembles one of regosched's OCI images from static binaries that
// are already built, with no base image and no Docker engine: a
// multi-platform OCI image layout (for crane push) and a `docker
// load`-able tarball per platform. Equal inputs give equal bytes: file
// times and the config's created are the source date (the commit's time),
// so two builds of a commit share digests.
//
//	go run . image -name regosched -version 0.1.0 -revision SHA -source-date-epoch 1796000000 \
//	  -out ../../dist/images linux/amd64=PATH linux/arm64=PATH
//
// sbom drops from CycloneDX SBOMs the hashes of modules replaced by a local
// directory (see runSBOM).
//
//	go run . sbom -local github.com/regosched/regosched FILE.cdx.json...
//
// make image and make release run it; see docs/releasing.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// options are the command line's.
type options struct {
	name, version, revision, registry, out string
	sourceDateEpoch                        int64
	binaries                               []string // os/arch=path
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.name, "name", "", "the image: regosched or regosched-scheduler")
	fs.StringVar(&o.version, "version", "", "the release version (the VERSION file): the tag and the version label")
	fs.StringVar(&o.revision, "revision", "", "the Git commit the binaries are built from")
	fs.StringVar(&o.registry, "registry", defaultRegistry, "the repository prefix of the tags written in the tarballs")
	fs.StringVar(&o.out, "out", "", "the folder to write the layout and tarballs to")
	fs.Int64Var(&o.sourceDateEpoch, "source-date-epoch", -1, "file times and the image's created, in Unix seconds (git log -1 --format=%ct)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o.binaries = fs.Args()
	var errs []error
	if _, ok := specs()[o.name]; !ok {
		errs = append(errs, fmt.Errorf("-name %q: want regosched or regosched-scheduler", o.name))
	}
	for flagName, v := range map[string]string{"version": o.version, "revision": o.revision, "out": o.out} {
		if v == "" {
			errs = append(errs, fmt.Errorf("-%s is required", flagName))
		}
	}
	if o.sourceDateEpoch < 0 {
		errs = append(errs, errors.New("-source-date-epoch is required"))
	}
	if len(o.binaries) == 0 {
		errs = append(errs, errors.New("give at least one os/arch=path binary"))
	}
	return o, errors.Join(errs...)
}

// run dispatches to a subcommand.
func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: release image|sbom FLAGS (see the package comment)")
	}
	switch args[0] {
	case "image":
		return runImage(args[1:], stdout)
	case "sbom":
		return runSBOM(args[1:])
	default:
		return fmt.Errorf("unknown subcommand %q: want image or sbom", args[0])
	}
}

func runImage(args []string, stdout io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	s := specs()[o.name]
	var binaries []platformBinary
	for _, arg := range o.binaries {
		plat, path, ok := strings.Cut(arg, "=")
		if !ok {
			return fmt.Errorf("binary %q: want os/arch=path", arg)
		}
		p, err := parsePlatform(plat)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%s binary: %w", p, err)
		}
		binaries = append(binaries, platformBinary{platform: p, binary: b})
	}
	r, notes, err := newRelease(o.version, o.revision, time.Unix(o.sourceDateEpoch, 0))
	if err != nil {
		return err
	}
	idx, imgs, err := r.index(s, binaries)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.out, err)
	}
	dir := filepath.Join(o.out, s.name)
	// Written anew, so that no blob of an earlier build stays in the layout.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the old layout: %w", err)
	}
	if _, err := layout.Write(dir, r.layoutIndex(idx)); err != nil {
		return fmt.Errorf("write the OCI layout %s: %w", dir, err)
	}
	if err := readableByAll(dir); err != nil {
		return err
	}
	tag, err := name.NewTag(o.registry + "/" + s.name + ":" + o.version)
	if err != nil {
		return fmt.Errorf("tag: %w", err)
	}
	d, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("index digest: %w", err)
	}
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	fmt.Fprintf(stdout, "%s: %s index %s (OCI layout %s)\n", s.name, tag, d, dir)
	for i, img := range imgs {
		p := binaries[i].platform
		file := filepath.Join(o.out, tarballName(s.name, o.version, p))
		if err := tarball.WriteToFile(file, tag, img); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
		if err := summarize(stdout, p, img, file); err != nil {
			return fmt.Errorf("%s %s: %w", s.name, p, err)
		}
	}
	return nil
}

// readableByAll sets a layout's files to 0644 and folders to 0755:
// go-containerregistry writes layer blobs 0600 and index.json 0755, and a
// release copied to a server must be readable by its other users.
func readableByAll(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", path, err)
		}
		mode := fs.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		if err := os.Chmod(path, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", path, err)
		}
		return nil
	})
}

// tarballName is a per-platform tarball's file name: regosched_0.1.0_linux_amd64.tar.
func tarballName(image, version string, p v1.Platform) string {
	return strings.Join([]string{image, version, p.OS, p.Architecture}, "_") + ".tar"
}

// summarize prints a platform's image digest and sizes.
func summarize(w io.Writer, p v1.Platform, img v1.Image, file string) error {
	d, err := img.Digest()
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	sz, err := imageSizes(img)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "  %-13s %s  layers %s compressed, %s uncompressed  (%s)\n",
		p.String(), d, megabytes(sz.compressed), megabytes(sz.uncompressed), filepath.Base(file))
	return err
}

// megabytes is n in MB (10^6 bytes), as registries show sizes.
func megabytes(n int64) string {
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB"
}
