package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where the images are published, and what their labels link to.
const (
	defaultRegistry = "ghcr.io/regosched"
	sourceURL       = "https://github.com/regosched/regosched"
	license         = "Apache-2.0"
)

// The OCI annotation keys used both as config labels and as index annotations.
const (
	labelTitle       = "org.opencontainers.image.title"
	labelDescription = "org.opencontainers.image.description"
	labelSource      = "org.opencontainers.image.source"
	labelVersion     = "org.opencontainers.image.version"
	labelRevision    = "org.opencontainers.image.revision"
	labelLicenses    = "org.opencontainers.image.licenses"
	labelCreated     = "org.opencontainers.image.created"
	// refName names a manifest inside an OCI layout; crane and skopeo pick
	// it by this name.
	refName = "org.opencontainers.image.ref.name"
)

// spec is what differs between the two images.
type spec struct {
	name        string // the image's repository name and its binary's
	description string
	cmd         []string
	ports       []string // documented listening ports, as "8888/tcp"
}

// specs are the images make image builds; a function rather than a
// package variable so that nothing can change them.
func specs() map[string]spec {
	return map[string]spec{
		"regosched": {
			name:        "regosched",
			description: "Kubernetes scheduler extender driven by Rego policies",
			cmd:         []string{"serve"},
			ports:       []string{"8888/tcp"},
		},
		"regosched-scheduler": {
			name:        "regosched-scheduler",
			description: "kube-scheduler with regosched's Rego placement rules as a framework plugin",
		},
	}
}

// release is what every image of one release shares.
type release struct {
	version  string // the VERSION file
	revision string // the Git commit
	created  time.Time
	// base is the layer of passwd, group, CA certificates and /tmp.
	base v1.Layer
}

// platformBinary is one architecture's build of an image's binary.
type platformBinary struct {
	platform v1.Platform
	binary   []byte
}

// parsePlatform reads "linux/amd64" or "linux/arm64/v8". arm64 gets the
// variant v8 when none is given, as Docker and distroless's indexes name it.
func parsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return v1.Platform{}, fmt.Errorf("platform %q: want os/arch or os/arch/variant", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	} else if p.Architecture == "arm64" {
		p.Variant = "v8"
	}
	return p, nil
}

// newLayer is an OCI gzip layer of entries, compressed once and kept.
func newLayer(entries []entry, mtime time.Time) (v1.Layer, error) {
	raw, err := layerTar(entries, mtime)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return l, nil
}

// newRelease builds the layer every image shares.
func newRelease(version, revision string, created time.Time) (release, []string, error) {
	ca, skipped, err := caBundle()
	if err != nil {
		return release{}, nil, err
	}
	base, err := newLayer(baseEntries(ca), created)
	if err != nil {
		return release{}, nil, fmt.Errorf("base layer: %w", err)
	}
	notes := []string{fmt.Sprintf("CA bundle: %d bytes; %d constrained (distrust-after) NSS roots left out", len(ca), skipped)}
	return release{version: version, revision: revision, created: created.UTC(), base: base}, notes, nil
}

// labels are the OCI labels of an image's config, also set as its index's
// annotations, where registries read them.
func (r release) labels(s spec) map[string]string {
	return map[string]string{
		labelTitle:       s.name,
		labelDescription: s.description,
		labelSource:      sourceURL,
		labelVersion:     r.version,
		labelRevision:    r.revision,
		labelLicenses:    license,
		labelCreated:     r.created.Format(time.RFC3339),
	}
}

// image is one platform's image of s: the shared base layer, then the binary.
func (r release) image(s spec, pb platformBinary) (v1.Image, error) {
	bin, err := newLayer(binaryEntries(s.name, pb.binary), r.created)
	if err != nil {
		return nil, fmt.Errorf("%s %s: binary layer: %w", s.name, pb.platform, err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: r.base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: r.created}, CreatedBy: "hack/release: passwd, group, CA certificates, /tmp",
		}},
		mutate.Addendum{Layer: bin, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: r.created}, CreatedBy: "hack/release: /" + s.name,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("%s %s: append layers: %w", s.name, pb.platform, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s %s: config: %w", s.name, pb.platform, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = pb.platform.OS, pb.platform.Architecture, pb.platform.Variant
	cf.Created = v1.Time{Time: r.created}
	cf.Author = sourceURL
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonrootUID, nonrootGID),
		Entrypoint: []string{"/" + s.name},
		Cmd:        s.cmd,
		WorkingDir: "/",
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/" + caBundlePath,
		},
		Labels: r.labels(s),
	}
	if len(s.ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.ports {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("%s %s: set config: %w", s.name, pb.platform, err)
	}
	return img, nil
}

// index is s's multi-platform index, with its images in the order given.
func (r release) index(s spec, binaries []platformBinary) (v1.ImageIndex, []v1.Image, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	imgs := make([]v1.Image, 0, len(binaries))
	for _, pb := range binaries {
		img, err := r.image(s, pb)
		if err != nil {
			return nil, nil, err
		}
		p := pb.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		imgs = append(imgs, img)
	}
	annotated, ok := mutate.Annotations(idx, r.labels(s)).(v1.ImageIndex)
	if !ok {
		return nil, nil, fmt.Errorf("%s: annotating the index did not give an index", s.name)
	}
	return annotated, imgs, nil
}

// layoutIndex is what an OCI layout's index.json holds: idx under the name
// of the release's version.
func (r release) layoutIndex(idx v1.ImageIndex) v1.ImageIndex {
	return mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add:        idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{refName: r.version}},
	})
}

// sizes are an image's layers' bytes, compressed as pushed and as unpacked.
type sizes struct {
	compressed, uncompressed int64
}

// imageSizes adds up img's layers.
func imageSizes(img v1.Image) (sizes, error) {
	layers, err := img.Layers()
	if err != nil {
		return sizes{}, fmt.Errorf("layers: %w", err)
	}
	var s sizes
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return sizes{}, fmt.Errorf("layer size: %w", err)
		}
		s.compressed += n
		rc, err := l.Uncompressed()
		if err != nil {
			return sizes{}, fmt.Errorf("open layer: %w", err)
		}
		m, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return sizes{}, fmt.Errorf("read layer: %w", err)
		}
		s.uncompressed += m
	}
	return s, nil
}
