package extender

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBodyBuffersAreReusedSafely: what one request decoded must not change
// when the next request is read into the same recycled buffer.
func TestBodyBuffersAreReusedSafely(t *testing.T) {
	body := func(pod, node string) string {
		return `{"Pod":{"metadata":{"name":"` + pod + `","namespace":"ns","labels":{"app":"` + pod + `"}}},"NodeNames":["` + node + `"]}`
	}
	var bodies bodyBuffers
	first, err := decode(&bodies, strings.NewReader(body("aaaa", "node-1")), -1, DefaultMaxBodyBytes, decodeArgs)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := decode(&bodies, strings.NewReader(body("bbbb", "node-2")), -1, DefaultMaxBodyBytes, decodeArgs); err != nil {
			t.Fatal(err)
		}
	}
	got := []string{first.Pod.Name, first.Pod.Labels["app"], (*first.NodeNames)[0]}
	if diff := cmp.Diff([]string{"aaaa", "aaaa", "node-1"}, got); diff != "" {
		t.Errorf("first request's values after the buffer was reused (-want +got):\n%s", diff)
	}
}

// TestBodyContentLength: Content-Length only sizes the buffer; a wrong one
// neither truncates the body nor makes regosched allocate what it claims,
// and the limit holds whatever the header says.
func TestBodyContentLength(t *testing.T) {
	valid := `{"Pod":{"metadata":{"name":"p","namespace":"ns"}},"NodeNames":["n1","n2"]}`
	tests := []struct {
		name   string
		body   string
		size   int64
		limit  int64
		want   []string
		tooBig bool
	}{
		{"exact", valid, int64(len(valid)), 1 << 20, []string{"n1", "n2"}, false},
		{"unknown", valid, -1, 1 << 20, []string{"n1", "n2"}, false},
		{"too small", valid, 10, 1 << 20, []string{"n1", "n2"}, false},
		{"claims a terabyte", valid, 1 << 40, 1 << 20, []string{"n1", "n2"}, false},
		{"over the limit", valid, int64(len(valid)), 20, nil, true},
		{"over the limit, unknown length", valid, -1, 20, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bodies bodyBuffers
			r := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(tt.body)), tt.limit)
			args, err := decode(&bodies, r, tt.size, tt.limit, decodeArgs)
			if tt.tooBig {
				if !errors.As(err, new(*http.MaxBytesError)) {
					t.Fatalf("decode() = %v, want a MaxBytesError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *args.NodeNames); diff != "" {
				t.Errorf("NodeNames (-want +got):\n%s", diff)
			}
		})
	}
}
