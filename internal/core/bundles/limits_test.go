package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/util/wait"
)

// bombTarball is a gzip tarball of a few hundred bytes whose one file, name,
// claims to be 1 TiB long (its content is a few bytes, then the end).
func bombTarball(t *testing.T, name string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1 << 40, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(`{"x": 1}`)); err != nil {
		t.Fatal(err)
	}
	// The tar writer is not closed: the file is short of its claimed size.
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// allocated returns the bytes allocated (in the whole process) while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxAlloc is what refusing an oversized bundle may allocate at most.
const maxAlloc = 64 << 20

// wantSizeError checks that err refuses a bundle for exceeding limit.
func wantSizeError(t *testing.T, what string, err error, limit int64) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want it refused for exceeding the size limit", what)
	}
	if !strings.Contains(err.Error(), "exceed") || !strings.Contains(err.Error(), strconv.FormatInt(limit, 10)) {
		t.Errorf("%s = %v, want an error naming the size limit (%d bytes)", what, err, limit)
	}
}

// TestSizeLimitRefusesBombs: a tarball whose header claims a huge file, or a
// directory with a file over the limit, is refused without allocating for it,
// whichever way it is read.
func TestSizeLimitRefusesBombs(t *testing.T) {
	vc, err := NewVerification("secret", "", "HS256", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := copyPolicy(t, false)
	big := filepath.Join(dir, "regosched", "big", "data.json")
	writeFile(t, big, "")
	// Sparse: it takes no disk space.
	if err := os.Truncate(big, DefaultBundleSizeLimit+1); err != nil {
		t.Fatal(err)
	}
	tarball := func(name string) string {
		p := filepath.Join(t.TempDir(), "bomb.tar.gz")
		writeFile(t, p, string(bombTarball(t, name)))
		return p
	}
	tests := []struct {
		name string
		// path is loaded with Load; when empty, fsys with LoadFS.
		path  string
		fsys  fs.FS
		opts  Options
		limit int64
	}{
		{name: "a tarball claiming a huge module", path: tarball("/regosched/bomb.rego"), limit: DefaultBundleSizeLimit},
		{name: "a tarball claiming a huge data file", path: tarball("/regosched/data.json"), limit: DefaultBundleSizeLimit},
		// The signature is checked after the files are read: a key is no help.
		{name: "a tarball claiming a huge file, with a verification key", path: tarball("/regosched/data.json"),
			opts: Options{Verification: vc}, limit: DefaultBundleSizeLimit},
		{name: "a directory with a file over the limit", path: dir, limit: DefaultBundleSizeLimit},
		{name: "an fs.FS with a file over the limit", fsys: os.DirFS(dir), limit: DefaultBundleSizeLimit},
		{name: "a smaller limit", path: copyPolicy(t, false), opts: Options{SizeLimitBytes: 1000}, limit: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			n := allocated(func() {
				if tt.path != "" {
					_, err = tt.opts.Load(ctx, tt.path)
				} else {
					_, err = tt.opts.LoadFS(ctx, tt.fsys, "test bundle")
				}
			})
			if n > maxAlloc {
				t.Errorf("allocated %d bytes, want at most %d", n, maxAlloc)
			}
			wantSizeError(t, "Load", err, tt.limit)
		})
	}
}

// TestWatcherRefusesBomb: a watched .tar.gz replaced by a bomb is refused
// and reported; the active policy stays.
func TestWatcherRefusesBomb(t *testing.T) {
	dir := copyPolicy(t, false)
	manifest(t, dir, "v1")
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	writeFile(t, path, string(tarDir(t, dir)))
	active, _ := watch(t, path)
	ctx := t.Context()
	var err error

	n := allocated(func() {
		writeFile(t, path, string(bombTarball(t, "/regosched/data.json")))
		err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
			func(context.Context) (bool, error) { return active.Status().LastError != "", nil })
	})
	if err != nil {
		t.Fatal("the bomb was never reported")
	}
	if n > maxAlloc {
		t.Errorf("allocated %d bytes, want at most %d", n, maxAlloc)
	}
	st := active.Status()
	if st.Revision != "v1" {
		t.Errorf("revision = %q, want v1 to stay active", st.Revision)
	}
	wantSizeError(t, "the watcher", fmt.Errorf("%s", st.LastError), DefaultBundleSizeLimit)
}

// TestRemoteSizeLimit: the downloader refuses a bomb without allocating for
// it, and a body over the limit, at once (not retried until the timeout).
func TestRemoteSizeLimit(t *testing.T) {
	// Many small files of random text: each is under the limit, the
	// whole compressed body is not.
	var padded bytes.Buffer
	gz := gzip.NewWriter(&padded)
	tw := tar.NewWriter(gz)
	for i := range 20 {
		raw := make([]byte, 500)
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		data := []byte(`{"pad": "` + hex.EncodeToString(raw) + `"}`)
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("/pad/%d/data.json", i), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		body  []byte
		limit int64
		want  string
	}{
		{"a tarball claiming a 1 TiB file", bombTarball(t, "/regosched/data.json"), 0, "file /regosched/data.json: 1099511627776 bytes exceeds the limit of 67108864 bytes per file (--policy-max-bytes)"},
		{"a body over the limit", padded.Bytes(), 4096, "policy bundle download exceeds the size limit of 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &bundleServer{}
			srv.publish(tt.body)
			hs := httptest.NewServer(srv)
			defer hs.Close()
			log, _ := logtest.NewNullLogger()
			r := &Remote{URL: hs.URL + "/b.tar.gz", MinDelay: time.Second, MaxDelay: time.Second, Insecure: true,
				Options: Options{SizeLimitBytes: tt.limit}, Log: log}
			var err error
			start := time.Now()
			if n := allocated(func() { _, err = r.First(context.Background(), 10*time.Second) }); n > maxAlloc {
				t.Errorf("allocated %d bytes, want at most %d", n, maxAlloc)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("First() = %v, want an error containing %q", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("First() took %v, want the bundle refused at once", d)
			}
		})
	}
}

// TestRemotePlainHTTP: plain http is refused where a man in the middle could
// steal the token or swap an unsigned bundle, unless Insecure says so.
func TestRemotePlainHTTP(t *testing.T) {
	vc, err := NewVerification("secret", "", "HS256", "")
	if err != nil {
		t.Fatal(err)
	}
	const tokenErr = `policy bundle URL "http://bundles.example/b.tar.gz": plain http would send the bearer token in clear text: use https, or --policy-insecure to allow it`
	const unsignedErr = `policy bundle URL "http://bundles.example/b.tar.gz": plain http lets anyone on the path replace an unsigned bundle: use https or --policy-verification-key, or --policy-insecure to allow it`
	tests := []struct {
		name     string
		url      string
		token    bool
		signed   bool
		insecure bool
		want     string
	}{
		{"http with a token", "http://bundles.example/b.tar.gz", true, true, false, tokenErr},
		{"http with a token, unsigned", "http://bundles.example/b.tar.gz", true, false, false, tokenErr},
		{"http unsigned", "http://bundles.example/b.tar.gz", false, false, false, unsignedErr},
		{"http signed", "http://bundles.example/b.tar.gz", false, true, false, ""},
		{"http with a token, insecure", "http://bundles.example/b.tar.gz", true, false, true, ""},
		{"http unsigned, insecure", "http://bundles.example/b.tar.gz", false, false, true, ""},
		{"https with a token, unsigned", "https://bundles.example/b.tar.gz", true, false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			r := &Remote{URL: tt.url, MinDelay: time.Second, MaxDelay: time.Second, Insecure: tt.insecure, Log: log}
			if tt.token {
				r.BearerTokenFile = filepath.Join(t.TempDir(), "token")
			}
			if tt.signed {
				r.Options.Verification = vc
			}
			got := ""
			if err := r.init(); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("init() error (-want +got):\n%s", diff)
			}
		})
	}
}
