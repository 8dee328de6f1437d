package output

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFormat(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Format
		wantErr bool
	}{{"table", Table, false}, {"json", JSON, false}, {"yaml", "", true}, {"", "", true}} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFormat(tt.in)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("ParseFormat(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, map[string][]int{"a": {1}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("{\n  \"a\": [\n    1\n  ]\n}\n", b.String()); diff != "" {
		t.Errorf("WriteJSON() mismatch (-want +got):\n%s", diff)
	}
}
