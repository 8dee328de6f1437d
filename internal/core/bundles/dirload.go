package bundles

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader/filter"
)

// fsLoader is the bundle.DirectoryLoader of a bundle directory or fs.FS. It
// lists the bundle first, refusing it from the sizes and kinds of its
// entries before reading any file, then counts what it reads so that a file
// that grew since it was listed is refused too. Files are opened one at a
// time, as they are read.
type fsLoader struct {
	fsys fs.FS
	// base prefixes the files' URLs (file names in parse errors): the
	// directory, or "" for an fs.FS.
	base  string
	files []string
	next  int
	// left is what the files may still read in all.
	left int64
}

// newFSLoader lists the bundle at the root of fsys, refusing it when it
// breaks a limit of o.
func (o Options) newFSLoader(fsys fs.FS, base string) (*fsLoader, error) {
	t := o.tally()
	l := &fsLoader{fsys: fsys, base: base, left: t.totalLimit}
	if err := l.list(".", t); err != nil {
		return nil, err
	}
	return l, nil
}

// list adds the files under dir to l.files, in lexical order as OPA's
// loaders do, reading the directory in batches so that a huge one is
// refused at the entry limit rather than listed whole.
func (l *fsLoader) list(dir string, t *tally) error {
	f, err := l.fsys.Open(dir)
	if err != nil {
		return err
	}
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		_ = f.Close()
		return fmt.Errorf("%s is not a directory", dir)
	}
	var entries []fs.DirEntry
	for {
		batch, err := d.ReadDir(256)
		for range batch {
			if terr := t.entry(); terr != nil {
				_ = f.Close()
				return terr
			}
		}
		entries = append(entries, batch...)
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("listing %s: %w", dir, err)
		}
	}
	_ = f.Close()
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		name := path.Join(dir, e.Name())
		switch {
		case e.IsDir():
			if err := l.list(name, t); err != nil {
				return err
			}
		case e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				return err
			}
			if err := t.file(name, info.Size()); err != nil {
				return err
			}
			l.files = append(l.files, name)
		default:
			return notFile(name, modeKind(e.Type()))
		}
	}
	return nil
}

// NextFile returns the next file, not opened yet.
func (l *fsLoader) NextFile() (*bundle.Descriptor, error) {
	if l.next >= len(l.files) {
		return nil, io.EOF
	}
	name := l.files[l.next]
	l.next++
	// Paths as OPA's directory loaders give them: from the bundle root,
	// with a leading slash.
	p := "/" + name
	url := p
	if l.base != "" {
		url = filepath.Join(l.base, filepath.FromSlash(name))
	}
	f := &lazyFile{l: l, name: name}
	return bundle.NewDescriptor(url, p, f).WithCloser(f), nil
}

// lazyFile opens its file at the first read, and counts what it reads
// against the bundle's total.
type lazyFile struct {
	l    *fsLoader
	name string
	f    fs.File
}

func (f *lazyFile) Read(p []byte) (int, error) {
	if f.f == nil {
		file, err := f.l.fsys.Open(f.name)
		if err != nil {
			return 0, err
		}
		f.f = file
		// Listed as a regular file: make sure it still is one (a pipe
		// would block the read).
		info, err := file.Stat()
		if err != nil {
			return 0, err
		}
		if !info.Mode().IsRegular() {
			return 0, notFile(f.name, modeKind(info.Mode()))
		}
	}
	if int64(len(p)) > f.l.left+1 {
		p = p[:f.l.left+1]
	}
	n, err := f.f.Read(p)
	f.l.left -= int64(n)
	if f.l.left < 0 {
		return 0, refuse("file %s grew while the bundle was read, past the limit for a whole bundle (--policy-max-total-bytes)", f.name)
	}
	return n, err
}

func (f *lazyFile) Close() error {
	if f.f == nil {
		return nil
	}
	return f.f.Close()
}

// The limits are the loader's own (Options'); bundle.Reader sets none of
// these but the size limit, which the listing has applied already.
func (l *fsLoader) WithFilter(filter.LoaderFilter) bundle.DirectoryLoader   { return l }
func (l *fsLoader) WithPathFormat(bundle.PathFormat) bundle.DirectoryLoader { return l }
func (l *fsLoader) WithSizeLimitBytes(int64) bundle.DirectoryLoader         { return l }
func (l *fsLoader) WithFollowSymlinks(bool) bundle.DirectoryLoader          { return l }
