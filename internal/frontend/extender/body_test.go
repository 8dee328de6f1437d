package extender

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// decodeFresh decodes the body of filter and prioritize with no recycled
// NodeNames.
func decodeFresh(body []byte) (*extenderv1.ExtenderArgs, error) { return decodeArgs(body, nil) }

// TestBodyBuffersAreReusedSafely: what one request decoded must not change
// when the next request is read into the same recycled buffer.
func TestBodyBuffersAreReusedSafely(t *testing.T) {
	body := func(pod, node string) string {
		return `{"Pod":{"metadata":{"name":"` + pod + `","namespace":"ns","labels":{"app":"` + pod + `"}}},"NodeNames":["` + node + `"]}`
	}
	var bodies bodyBuffers
	first, err := decode(&bodies, strings.NewReader(body("aaaa", "node-1")), -1, DefaultMaxBodyBytes, decodeFresh)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := decode(&bodies, strings.NewReader(body("bbbb", "node-2")), -1, DefaultMaxBodyBytes, decodeFresh); err != nil {
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
			args, err := decode(&bodies, r, tt.size, tt.limit, decodeFresh)
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

// TestDecodeArgsIntoRoom: NodeNames decode into the room they are given,
// in place, and decode to what a fresh decode gives whatever room holds:
// null stays nil (full Node objects), a list longer than room grows, an
// empty list and a missing key are still told apart.
func TestDecodeArgsIntoRoom(t *testing.T) {
	const pod = `"Pod":{"metadata":{"name":"p","namespace":"ns"}}`
	tests := []struct {
		name    string
		body    string
		want    *[]string
		inPlace bool
		err     string
	}{
		{"fits", `{` + pod + `,"NodeNames":["n1","n2"]}`, &[]string{"n1", "n2"}, true, ""},
		{"fills", `{` + pod + `,"NodeNames":["n1","n2","n3"]}`, &[]string{"n1", "n2", "n3"}, true, ""},
		{"longer than room", `{` + pod + `,"NodeNames":["n1","n2","n3","n4"]}`, &[]string{"n1", "n2", "n3", "n4"}, false, ""},
		{"null, with Nodes", `{` + pod + `,"NodeNames":null,"Nodes":{"items":[{"metadata":{"name":"n1"}}]}}`, nil, false, ""},
		{"empty list", `{` + pod + `,"NodeNames":[]}`, &[]string{}, false, ""},
		{"no key", `{` + pod + `}`, nil, false, "neither NodeNames nor Nodes"},
		{"null, no Nodes", `{` + pod + `,"NodeNames":null}`, nil, false, "neither NodeNames nor Nodes"},
		{"malformed name", `{` + pod + `,"NodeNames":["n1",2]}`, nil, false, "decoding ExtenderArgs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			room := []string{"stale-1", "stale-2", "stale-3"}[:0]
			args, err := decodeArgs([]byte(tt.body), room)
			fresh, freshErr := decodeFresh([]byte(tt.body))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("decodeArgs() error = %v, want one containing %q", err, tt.err)
				}
				if freshErr == nil || freshErr.Error() != err.Error() {
					t.Errorf("fresh decode error = %v, want the same as with room: %v", freshErr, err)
				}
				return
			}
			if err != nil || freshErr != nil {
				t.Fatalf("decodeArgs() = %v, fresh %v", err, freshErr)
			}
			if diff := cmp.Diff(tt.want, args.NodeNames); diff != "" {
				t.Errorf("NodeNames (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(fresh, args); diff != "" {
				t.Errorf("decoded into room vs fresh (-fresh +room):\n%s", diff)
			}
			if got := args.NodeNames != nil && len(*args.NodeNames) > 0 && &(*args.NodeNames)[0] == &room[:1][0]; got != tt.inPlace {
				t.Errorf("decoded in room's array = %v, want %v", got, tt.inPlace)
			}
		})
	}
}

// TestArgsDecoderRecycles: requests decoded one after another through one
// argsDecoder, each released when answered, read only their own names
// (a recycled slice is cleared and cut to the new list), whatever sync.Pool
// keeps.
func TestArgsDecoderRecycles(t *testing.T) {
	body := func(names string) []byte {
		return []byte(`{"Pod":{"metadata":{"name":"p","namespace":"ns"}},` + names + `}`)
	}
	var a argsDecoder
	for i, tt := range []struct {
		names string
		want  *[]string
	}{
		{`"NodeNames":["a","b","c","d"]`, &[]string{"a", "b", "c", "d"}},
		{`"NodeNames":["e","f"]`, &[]string{"e", "f"}},
		{`"NodeNames":null,"Nodes":{"items":[]}`, nil},
		{`"NodeNames":["g"]`, &[]string{"g"}},
		{`"NodeNames":["h",1]`, nil},
		{`"NodeNames":[]`, &[]string{}},
		{`"NodeNames":["i","j","k","l","m"]`, &[]string{"i", "j", "k", "l", "m"}},
	} {
		args, err := a.decode(body(tt.names))
		if err != nil {
			if tt.want != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			continue
		}
		if diff := cmp.Diff(tt.want, args.NodeNames); diff != "" {
			t.Errorf("request %d NodeNames (-want +got):\n%s", i, diff)
		}
		a.release(args)
	}
}

// TestRecycledClear: a recycled slice keeps no name of the request that
// released it, up to its capacity.
func TestRecycledClear(t *testing.T) {
	var l recycled[string]
	l.put([]string{"a", "b", "c"})
	room := l.get()
	if room == nil {
		t.Skip("sync.Pool dropped the slice (it does at random under the race detector)")
	}
	if diff := cmp.Diff([]string{"", "", ""}, room[:cap(room)]); diff != "" {
		t.Errorf("recycled slice (-want +got):\n%s", diff)
	}
}
