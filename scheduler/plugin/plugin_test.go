package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    Args
		wantErr bool
	}{
		{name: "none", want: Args{LogLevel: "info", SyncTimeout: "2m"}},
		{name: "all", raw: `{"policy":"/etc/regosched/bundle.tar.gz","policyData":"/etc/regosched/data.yaml","logLevel":"debug","syncTimeout":"30s"}`,
			want: Args{Policy: "/etc/regosched/bundle.tar.gz", PolicyData: "/etc/regosched/data.yaml", LogLevel: "debug", SyncTimeout: "30s"}},
		{name: "an unknown field", raw: `{"polcy":"x"}`, wantErr: true},
		{name: "not JSON", raw: `{`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj runtime.Object
			if tt.raw != "" {
				obj = &runtime.Unknown{Raw: []byte(tt.raw), ContentType: runtime.ContentTypeJSON}
			}
			got, err := decodeArgs(obj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeArgs error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); !tt.wantErr && diff != "" {
				t.Errorf("decodeArgs (-want +got):\n%s", diff)
			}
		})
	}
}
