package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The user the images run as, as in distroless's static:nonroot.
const (
	nonrootUID = 65532
	nonrootGID = 65532
)

// Paths inside the images.
const (
	caBundlePath = "etc/ssl/certs/ca-certificates.crt"
	passwdPath   = "etc/passwd"
	groupPath    = "etc/group"
)

// entry is one file or directory of a layer.
type entry struct {
	name     string // relative to the root: no leading slash
	mode     fs.FileMode
	uid, gid int
	body     []byte // nil for a directory
}

// passwd and group name root, nobody and nonroot, as distroless's static:nonroot
// does, so that tools and libraries that look the running user up find it.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
	// nsswitch tells Go's resolver to read /etc/hosts before DNS, as glibc
	// systems (and distroless) do.
	nsswitch = "hosts: files dns\n"
)

// baseEntries is the layer that both images share: the user database, CA
// certificates and a world-writable /tmp, what distroless's static:nonroot
// gave and the binaries need.
func baseEntries(caBundle []byte) []entry {
	return []entry{
		{name: "etc", mode: fs.ModeDir | 0o755},
		{name: groupPath, mode: 0o644, body: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte(nsswitch)},
		{name: passwdPath, mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl", mode: fs.ModeDir | 0o755},
		{name: "etc/ssl/certs", mode: fs.ModeDir | 0o755},
		{name: caBundlePath, mode: 0o644, body: caBundle},
		{name: "home", mode: fs.ModeDir | 0o755},
		{name: "home/nonroot", mode: fs.ModeDir | 0o700, uid: nonrootUID, gid: nonrootGID},
		{name: "root", mode: fs.ModeDir | 0o700},
		{name: "tmp", mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
}

// binaryEntries is the layer of one image's own binary, at the root.
func binaryEntries(name string, binary []byte) []entry {
	return []entry{{name: name, mode: 0o755, body: binary}}
}

// layerTar writes entries as an uncompressed tar whose headers hold nothing
// but what entries say and mtime, so equal inputs give equal bytes.
func layerTar(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    tarMode(e.mode),
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.mode.IsDir() {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header of %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("tar body of %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close the tar: %w", err)
	}
	return buf.Bytes(), nil
}

// tarMode is the tar header's mode of m: the permission bits and the sticky
// bit (c_ISVTX), which archive/tar does not take from an fs.FileMode itself.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// caBundle is the PEM file of the NSS roots that golang.org/x/crypto's
// x509roots/fallback/bundle pins, less those that carry a constraint (a
// distrust-after date), which a PEM file cannot express: trusting them
// without it would accept certificates that NSS refuses. It also returns how
// many roots it left out.
func caBundle() (pemBytes []byte, skipped int, err error) {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			skipped++
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, 0, fmt.Errorf("encode a root certificate: %w", err)
		}
	}
	if buf.Len() == 0 {
		return nil, 0, fmt.Errorf("x509roots/fallback/bundle gave no unconstrained root")
	}
	return buf.Bytes(), skipped, nil
}
