package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// sourceDate is a fixed commit time for the tests.
func sourceDate() time.Time { return time.Date(2026, 12, 7, 3, 24, 11, 0, time.UTC) }

func TestParsePlatform(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    v1.Platform
		wantErr bool
	}{
		{in: "linux/amd64", want: v1.Platform{OS: "linux", Architecture: "amd64"}},
		{in: "linux/arm64", want: v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}},
		{in: "linux/arm/v7", want: v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
		{in: "linux", wantErr: true},
		{in: "linux/", wantErr: true},
		{in: "a/b/c/d", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parsePlatform(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parsePlatform(%q) error = %v, want error %t", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsePlatform(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestBaseLayer(t *testing.T) {
	ca, _, err := caBundle()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := layerTar(baseEntries(ca), sourceDate())
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		Mode     int64
		UID, GID int
		Dir      bool
	}
	got := map[string]file{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(sourceDate()) {
			t.Errorf("%s: mtime %s, want the source date %s", h.Name, h.ModTime, sourceDate())
		}
		got[h.Name] = file{Mode: h.Mode, UID: h.Uid, GID: h.Gid, Dir: h.Typeflag == tar.TypeDir}
	}
	for _, tc := range []struct {
		path string
		want file
	}{
		{"etc/", file{Mode: 0o755, Dir: true}},
		{"etc/passwd", file{Mode: 0o644}},
		{"etc/group", file{Mode: 0o644}},
		{"etc/ssl/certs/ca-certificates.crt", file{Mode: 0o644}},
		{"home/nonroot/", file{Mode: 0o700, UID: 65532, GID: 65532, Dir: true}},
		{"tmp/", file{Mode: 0o1777, Dir: true}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			f, ok := got[tc.path]
			if !ok {
				t.Fatalf("the base layer has no %s", tc.path)
			}
			if diff := cmp.Diff(tc.want, f); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.path, diff)
			}
		})
	}
	n, err := countCertificates(ca)
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Errorf("the CA bundle holds %d certificates, want the NSS roots (over 100)", n)
	}
}

// build is one input set of the reproducibility test.
type build struct {
	version string
	created time.Time
	binary  []byte
}

// indexDigest builds the regosched index of b for two platforms.
func indexDigest(t *testing.T, b build) v1.Hash {
	t.Helper()
	r, _, err := newRelease(b.version, "0123456789abcdef0123456789abcdef01234567", b.created)
	if err != nil {
		t.Fatal(err)
	}
	var bins []platformBinary
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		plat, err := parsePlatform(p)
		if err != nil {
			t.Fatal(err)
		}
		bins = append(bins, platformBinary{platform: plat, binary: append([]byte(p+" "), b.binary...)})
	}
	idx, _, err := r.index(specs()["regosched"], bins)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestReproducible(t *testing.T) {
	first := build{version: "0.1.0", created: sourceDate(), binary: []byte("a static binary")}
	for _, tc := range []struct {
		name     string
		second   build
		wantSame bool
	}{
		{"the same commit built again", first, true},
		{"another commit time", build{version: "0.1.0", created: sourceDate().Add(time.Second), binary: first.binary}, false},
		{"another version", build{version: "0.1.1", created: sourceDate(), binary: first.binary}, false},
		{"another binary", build{version: "0.1.0", created: sourceDate(), binary: []byte("another static binary")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := indexDigest(t, first), indexDigest(t, tc.second)
			if got := a == b; got != tc.wantSame {
				t.Errorf("digests %s and %s: equal = %t, want %t", a, b, got, tc.wantSame)
			}
		})
	}
}

// TestRun runs the command on stand-in binaries and reads what it wrote
// with the checks make image-test applies to the real images.
func TestRun(t *testing.T) {
	out := t.TempDir()
	bins := t.TempDir()
	var args []string
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		path := filepath.Join(bins, strings.ReplaceAll(p, "/", "_"))
		if err := os.WriteFile(path, []byte("#!/bin/false "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		args = append(args, p+"="+path)
	}
	flags := []string{"image", "-name", "regosched-scheduler", "-version", "0.1.0", "-revision", "0123456789abcdef0123456789abcdef01234567",
		"-source-date-epoch", "1796613851", "-out", out}
	var index [2][]byte
	for i := range index {
		var stdout bytes.Buffer
		if err := run(append(flags, args...), &stdout); err != nil {
			t.Fatalf("run: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(out, "regosched-scheduler", "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		index[i] = b
	}
	if diff := cmp.Diff(string(index[0]), string(index[1])); diff != "" {
		t.Errorf("index.json of two runs (-first +second):\n%s", diff)
	}
	s := specs()["regosched-scheduler"]
	err := filepath.WalkDir(filepath.Join(out, s.name), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode() != 0o644 {
			t.Errorf("%s: mode %s, want -rw-r--r--", path, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := layoutImageIndex(filepath.Join(out, s.name), "0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	// Validated as read back: in memory, go-containerregistry's manifests
	// carry empty annotation maps where the JSON has none.
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the layout's index does not validate: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, s, *d.Platform, img, "0.1.0")
		checkTarball(t, filepath.Join(out, tarballName(s.name, "0.1.0", *d.Platform)), img)
		root := t.TempDir()
		if err := extractImage(img, root); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(root, s.name))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fs.FileMode(0o755), fi.Mode()); diff != "" {
			t.Errorf("/%s mode (-want +got):\n%s", s.name, diff)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64/v8"}, platforms); diff != "" {
		t.Errorf("index platforms (-want +got):\n%s", diff)
	}
}

func TestParseRefuses(t *testing.T) {
	full := []string{"-name", "regosched", "-version", "0.1.0", "-revision", "abc", "-source-date-epoch", "0", "-out", "x", "linux/amd64=bin"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown image", append([]string{"-name", "other"}, full[2:]...), `-name "other"`},
		{"no version", append(append([]string{}, full[:2]...), full[4:]...), "-version is required"},
		{"no source date", append(append([]string{}, full[:6]...), full[8:]...), "-source-date-epoch is required"},
		{"no binary", full[:len(full)-1], "at least one os/arch=path binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse(%q) = %v, want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}
