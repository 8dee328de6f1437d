package bundles

import (
	"archive/tar"
	"compress/gzip"
	"io"
)

// checked is the gzip tarball src, decoded, checked entry by entry against
// the limits of a tally and encoded again (stored, not compressed) for OPA's
// tarball loader, which decompresses every file into memory before it
// checks anything. An entry reaches the loader only once its header has
// passed, so the loader never holds more than the total limit, and a
// tarball that breaks a limit fails the loader's next read.
type checked struct {
	src io.Reader
	t   *tally
	tr  *tar.Reader // nil before the first read
	tw  *tar.Writer
	zw  *gzip.Writer
	// out[off:] is encoded output not read yet (out is reused once read);
	// buf holds entry data in transit.
	out, buf []byte
	off      int
	inEntry  bool
	// err ends the stream once out is drained.
	err error
}

func newChecked(src io.Reader, t *tally) *checked {
	return &checked{src: src, t: t}
}

func (c *checked) Read(p []byte) (int, error) {
	for c.off == len(c.out) {
		if c.err != nil {
			return 0, c.err
		}
		c.out, c.off = c.out[:0], 0
		c.err = c.step()
	}
	n := copy(p, c.out[c.off:])
	c.off += n
	return n, nil
}

// Write takes the encoder's output.
func (c *checked) Write(p []byte) (int, error) {
	c.out = append(c.out, p...)
	return len(p), nil
}

// step decodes and encodes again one header or one chunk of an entry's
// data. Errors of the source pass on as they are (the loader reports a
// stream it cannot read in its own words), limitErrors as the refusal.
func (c *checked) step() error {
	if c.tr == nil {
		zr, err := gzip.NewReader(c.src)
		if err != nil {
			return err
		}
		c.tr = tar.NewReader(zr)
		// Stored: the loader decodes it with a copy.
		if c.zw, err = gzip.NewWriterLevel(c, gzip.NoCompression); err != nil {
			return err
		}
		c.tw = tar.NewWriter(c.zw)
		c.buf = make([]byte, 32<<10)
	}
	if c.inEntry {
		n, err := c.tr.Read(c.buf)
		if _, werr := c.tw.Write(c.buf[:n]); werr != nil {
			return werr
		}
		if err == io.EOF {
			c.inEntry = false
			return nil
		}
		if err == nil {
			// Encoded data may sit in the gzip writer's buffer (64 KiB at
			// most) until the next step.
			return nil
		}
		return err
	}
	h, err := c.tr.Next()
	if err == io.EOF {
		if err := c.tw.Close(); err != nil {
			return err
		}
		if err := c.zw.Close(); err != nil {
			return err
		}
		return io.EOF
	}
	if err != nil {
		return err
	}
	if err := c.t.entry(); err != nil {
		return err
	}
	switch {
	case h.Typeflag == tar.TypeGNUSparse || hasSparsePAX(h):
		return notFile(h.Name, "a sparse file")
	case h.Typeflag == tar.TypeReg:
		if err := c.t.file(h.Name, h.Size); err != nil {
			return err
		}
		c.inEntry = h.Size > 0
	case h.Typeflag == tar.TypeDir:
	case h.Typeflag == tar.TypeXGlobalHeader:
		return nil // metadata (git archive writes a comment): not passed on
	default:
		return notFile(h.Name, tarKind(h.Typeflag))
	}
	return c.tw.WriteHeader(&tar.Header{Name: h.Name, Typeflag: h.Typeflag, Size: h.Size, Mode: h.Mode})
}

// checkedBody is a response body read through checked.
type checkedBody struct {
	*checked
	body io.Closer
}

func (b checkedBody) Close() error { return b.body.Close() }
