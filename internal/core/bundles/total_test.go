package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched"
)

// zeroMiB is one gzip member holding 1 MiB of zeros: gzip readers join
// members, so a tarball of hundreds of MiB of zeros is built by repeating it
// instead of compressing that much at test time (minutes under -race).
var zeroMiB = sync.OnceValue(func() []byte { return gzipped(make([]byte, 1<<20)) })

func gzipped(p []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write(p)
	_ = zw.Close()
	return b.Bytes()
}

// zerosTarball is the tarball of the issue: files data files of size bytes of
// zeros each (12 of 60 MiB compress to about 720 KiB).
func zerosTarball(t testing.TB, files int, size int64) []byte {
	t.Helper()
	var out bytes.Buffer
	for i := range files {
		var hdr bytes.Buffer
		tw := tar.NewWriter(&hdr)
		// Only the header is wanted: the writer is left unfinished.
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("/zeros/%d/data.json", i), Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		out.Write(gzipped(hdr.Bytes()))
		left := size
		for ; left >= 1<<20; left -= 1 << 20 {
			out.Write(zeroMiB())
		}
		out.Write(gzipped(make([]byte, left+(512-size%512)%512))) // the rest and the block padding
	}
	out.Write(gzipped(make([]byte, 1024))) // end of archive
	return out.Bytes()
}

// tarOf returns a gzip tarball of the given entries; a nil content writes
// an entry with no data (links, devices).
func tarOf(t testing.TB, hdrs []*tar.Header, contents [][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for i, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(contents[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withBlock returns a gzip tarball of one raw header block (its checksum
// set here) followed by data, then the end of the archive: tar.Writer will
// not write the old GNU sparse or PAX sparse forms.
func withBlock(t testing.TB, blocks ...[]byte) []byte {
	t.Helper()
	var raw bytes.Buffer
	for _, b := range blocks {
		raw.Write(b)
	}
	raw.Write(make([]byte, 1024))
	return gzipped(raw.Bytes())
}

// header returns a ustar header block for name of size bytes with typeflag.
func header(t testing.TB, name string, size int64, typeflag byte) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	blk := b.Bytes()[:512]
	blk[156] = typeflag
	copy(blk[148:156], "        ")
	sum := 0
	for _, c := range blk {
		sum += int(c)
	}
	copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return blk
}

// padded returns p padded with zeros to a whole number of tar blocks.
func padded(p []byte) []byte {
	return append(p, make([]byte, (512-len(p)%512)%512)...)
}

// paxSparse is a GNU PAX sparse file (format 0.1): 5 bytes in the archive
// that read as a 1 GiB file.
func paxSparse(t testing.TB) []byte {
	t.Helper()
	var recs string
	for _, kv := range [][2]string{{"GNU.sparse.map", "0,5"}, {"GNU.sparse.numblocks", "1"},
		{"GNU.sparse.name", "/regosched/data.json"}, {"GNU.sparse.realsize", "1073741824"}} {
		recs += paxRecord(kv[0], kv[1])
	}
	return withBlock(t, header(t, "PaxHeaders/0", int64(len(recs)), tar.TypeXHeader), padded([]byte(recs)),
		header(t, "GNUSparseFile.0/data.json", 5, tar.TypeReg), padded([]byte("{}   ")))
}

// paxRecord is one "length key=value\n" record, its length counting itself.
func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec) + 1
	for len(strconv.Itoa(n))+len(rec) != n {
		n++
	}
	return strconv.Itoa(n) + rec
}

// writeTarball writes a tarball to a new file and returns its path.
func writeTarball(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sparseDir is the default policy plus files data files of size bytes that
// take no disk space.
func sparseDir(t *testing.T, files int, size int64) string {
	t.Helper()
	dir := copyPolicy(t, false)
	for i := range files {
		p := filepath.Join(dir, "zeros", strconv.Itoa(i), "data.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	return dir
}

// smallFiles is a gzip tarball of n one-line data files.
func smallFiles(t testing.TB, n int) []byte {
	t.Helper()
	var hdrs []*tar.Header
	var contents [][]byte
	for i := range n {
		c := []byte(`{"x": 1}`)
		hdrs = append(hdrs, &tar.Header{Name: fmt.Sprintf("/many/%d/data.json", i), Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg})
		contents = append(contents, c)
	}
	return tarOf(t, hdrs, contents)
}

// wantAll checks that err is an error containing every part of want.
func wantAll(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want an error containing %q", what, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s = %v\nwant it to contain %q", what, err, w)
		}
	}
}

// bound is what refusing a bundle over its limits may allocate: OPA's loader
// holds only the files before the one that breaks a limit (none in most
// cases here, 10 MiB in the 12 MiB one).
const bound = 16 << 20

// TestTotalLimits: a bundle whose files add up to more than the total limit,
// or hold too many entries, sparse entries or entries other than files and
// directories, is refused while it is streamed, before it is held in memory,
// whichever way it is read (the scheduler plugin's LoadLocal too).
func TestTotalLimits(t *testing.T) {
	vc, err := NewVerification("secret", "", "HS256", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	issue := writeTarball(t, zerosTarball(t, 12, 60<<20))
	small := writeTarball(t, zerosTarball(t, 8, 5<<20))
	scaled := Options{SizeLimitBytes: 6 << 20, TotalLimitBytes: 12 << 20}
	entry := func(h *tar.Header) string { return writeTarball(t, tarOf(t, []*tar.Header{h}, [][]byte{nil})) }
	symlinked := copyPolicy(t, false)
	writeFile(t, filepath.Join(symlinked, "regosched", "extra", "keep"), "")
	if err := os.Symlink("/etc/passwd", filepath.Join(symlinked, "regosched", "extra", "data.json")); err != nil {
		t.Fatal(err)
	}
	fifo := copyPolicy(t, false)
	writeFile(t, filepath.Join(fifo, "regosched", "extra", "keep"), "")
	if err := mkfifo(filepath.Join(fifo, "regosched", "extra", "data.json")); errors.Is(err, errors.ErrUnsupported) {
		fifo = "" // its case is skipped
	} else if err != nil {
		t.Fatal(err)
	}
	manyDir := copyPolicy(t, false)
	for i := range 60 {
		writeFile(t, filepath.Join(manyDir, "many", strconv.Itoa(i), "data.json"), `{"x": 1}`)
	}
	tests := []struct {
		name string
		path string
		opts Options
		// local loads with LoadLocal (the scheduler plugin's way).
		local bool
		want  []string
	}{
		{name: "12 files of 60 MiB of zeros, with a verification key", path: issue, opts: Options{Verification: vc},
			want: []string{issue, "exceeds the limit of 16777216 bytes for a whole bundle (--policy-max-total-bytes)"}},
		{name: "12 files of 60 MiB of zeros, through LoadLocal", path: issue, local: true,
			want: []string{issue, "16777216 bytes for a whole bundle"}},
		{name: "8 files of 5 MiB, total limit 12 MiB", path: small, opts: scaled,
			want: []string{small, "/zeros/2/data.json", "exceeds the limit of 12582912 bytes for a whole bundle"}},
		{name: "more entries than the limit", path: writeTarball(t, smallFiles(t, 50)), opts: Options{MaxEntries: 20},
			want: []string{"more than 20 entries (--policy-max-entries)"}},
		{name: "a GNU sparse entry", path: writeTarball(t, withBlock(t, header(t, "/regosched/data.json", 5, tar.TypeGNUSparse), padded([]byte("{}   ")))),
			want: []string{"/regosched/data.json", "sparse"}},
		{name: "a PAX sparse entry", path: writeTarball(t, paxSparse(t)), want: []string{"/regosched/data.json", "sparse"}},
		{name: "a symlink entry", path: entry(&tar.Header{Name: "/regosched/data.json", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}),
			want: []string{"/regosched/data.json", "is a symlink"}},
		{name: "a hard link entry", path: entry(&tar.Header{Name: "/regosched/data.json", Typeflag: tar.TypeLink, Linkname: "/x"}),
			want: []string{"/regosched/data.json", "is a hard link"}},
		{name: "a device entry", path: entry(&tar.Header{Name: "/regosched/data.json", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 5}),
			want: []string{"/regosched/data.json", "is a character device"}},
		{name: "a directory over the total", path: sparseDir(t, 12, 60<<20),
			want: []string{"exceeds the limit of 16777216 bytes for a whole bundle (--policy-max-total-bytes)"}},
		{name: "a directory over the total, through LoadLocal", path: sparseDir(t, 3, 7<<20), local: true,
			opts: Options{TotalLimitBytes: 8 << 20}, want: []string{"zeros/1/data.json brings the bundle to", "exceeds the limit of 8388608 bytes for a whole bundle"}},
		{name: "a directory with more entries than the limit", path: manyDir, opts: Options{MaxEntries: 50},
			want: []string{manyDir, "more than 50 entries (--policy-max-entries)"}},
		{name: "a directory with a symlink", path: symlinked, want: []string{symlinked, "data.json", "is a symlink"}},
		{name: "a directory with a named pipe", path: fifo, want: []string{fifo, "data.json", "is a named pipe"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.path == "" {
				t.Skip("named pipes are a Unix case")
			}
			var err error
			n := allocated(func() {
				if tt.local {
					_, _, err = tt.opts.LoadLocal(ctx, tt.path, regosched.DefaultPolicy())
				} else {
					_, err = tt.opts.Load(ctx, tt.path)
				}
			})
			wantAll(t, "Load", err, append([]string{"reading policy bundle"}, tt.want...)...)
			t.Logf("allocated %d bytes to refuse it: %v", n, err)
			if n > bound {
				t.Errorf("allocated %d bytes, want at most %d", n, bound)
			}
		})
	}
}

// TestTotalLimitsKeepGoodBundles: bundles within the limits load as before,
// and their files are those the loader read without the limits.
func TestTotalLimitsKeepGoodBundles(t *testing.T) {
	dir := copyPolicy(t, true)
	for _, f := range forms(t, dir) {
		t.Run(f.name, func(t *testing.T) {
			b, err := f.read()
			if err != nil {
				t.Fatal(err)
			}
			all, _ := regoFiles(t, dir)
			if diff := cmp.Diff(all, moduleFiles(b)); diff != "" {
				t.Errorf("modules (-want +got):\n%s", diff)
			}
			// At exactly its size, and with as many entries as the directory
			// has (a tarball has fewer: no directory entries): still loaded.
			var size int64
			entries := 0
			if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || p == dir {
					return err
				}
				entries++
				if info, err := d.Info(); err == nil && d.Type().IsRegular() {
					size += info.Size()
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.load(context.Background(), Options{TotalLimitBytes: size, MaxEntries: entries}); err != nil {
				t.Errorf("Load with limits %d bytes and %d entries = %v", size, entries, err)
			}
		})
	}
}

// TestRemoteTotalLimit: the downloaded 12 × 60 MiB tarball is refused at
// once, without holding it; on a later poll it is reported and the active
// bundle stays.
func TestRemoteTotalLimit(t *testing.T) {
	body := zerosTarball(t, 12, 60<<20)
	t.Run("First", func(t *testing.T) {
		srv := &bundleServer{}
		srv.publish(body)
		hs := httptest.NewServer(srv)
		defer hs.Close()
		log, _ := logtest.NewNullLogger()
		r := &Remote{URL: hs.URL + "/b.tar.gz", MinDelay: time.Second, MaxDelay: time.Second, Insecure: true, Log: log}
		var err error
		start := time.Now()
		n := allocated(func() { _, err = r.First(context.Background(), 20*time.Second) })
		wantAll(t, "First", err, hs.URL+"/b.tar.gz", "exceeds the limit of 16777216 bytes for a whole bundle")
		t.Logf("allocated %d bytes to refuse it: %v", n, err)
		if n > bound {
			t.Errorf("allocated %d bytes, want at most %d", n, bound)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("First() took %v, want the bundle refused at once", d)
		}
	})
	t.Run("Run", func(t *testing.T) {
		srv := &bundleServer{}
		srv.publish(revisions(t, nil, "r1")["r1"])
		f := startRemote(t, srv, nil)
		srv.publish(body)
		f.waitFor(t, "the refusal", func(s Status) bool { return s.LastError != "" })
		st := f.active.Status()
		if st.Revision != "r1" || !strings.Contains(st.LastError, "16777216 bytes for a whole bundle") {
			t.Errorf("Status() = %+v, want r1 kept and the total limit named", st)
		}
	})
}

// TestWatcherRefusesManyFiles: a watched .tar.gz replaced by the 12 × 60
// MiB tarball is refused and reported; the active policy stays.
func TestWatcherRefusesManyFiles(t *testing.T) {
	dir := copyPolicy(t, false)
	manifest(t, dir, "v1")
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	writeFile(t, path, string(tarDir(t, dir)))
	active, _ := watch(t, path)
	bomb := zerosTarball(t, 12, 60<<20)
	var err error
	n := allocated(func() {
		writeFile(t, path, string(bomb))
		err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true,
			func(context.Context) (bool, error) { return active.Status().LastError != "", nil })
	})
	if err != nil {
		t.Fatal("the tarball was never reported")
	}
	if n > bound {
		t.Errorf("allocated %d bytes, want at most %d", n, bound)
	}
	st := active.Status()
	if st.Revision != "v1" || !strings.Contains(st.LastError, path) || !strings.Contains(st.LastError, "16777216 bytes for a whole bundle") {
		t.Errorf("Status() = %+v, want v1 kept and an error naming %s and the total limit", st, path)
	}
}

// TestTotalLimitHoldsOnlyWhatPassed: a bundle that breaks the total limit
// at its second file is refused, OPA's loader having held its first file
// only, not the second (whose header announced the size it preallocates).
func TestTotalLimitHoldsOnlyWhatPassed(t *testing.T) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for i := range 3 {
		noise := make([]byte, 3<<20)
		_, _ = rand.Read(noise)
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("/noise/%d/data.json", i), Mode: 0o644, Size: int64(len(noise)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(noise); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := writeTarball(t, b.Bytes())
	const total = 5 << 20
	opts := Options{TotalLimitBytes: total}
	n := allocated(func() { _, err = opts.Load(context.Background(), path) })
	wantAll(t, "Load", err, path, "/noise/1/data.json brings the bundle to 6291456 bytes, which exceeds the limit of 5242880 bytes")
	// The first file, and the decoders' and encoder's buffers.
	if want := int64(3<<20 + 2<<20); int64(n) > want {
		t.Errorf("allocated %d bytes, want at most %d", n, want)
	}
}
