package policy

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/regosched/regosched"
)

// defaultWithData is the embedded default bundle with its config replaced.
func defaultWithData(t *testing.T, config string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(regosched.DefaultPolicy(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(regosched.DefaultPolicy(), p)
		out[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out["regosched/config/data.json"] = &fstest.MapFile{Data: []byte(config)}
	return out
}

func TestCompileRefusesInvalidData(t *testing.T) {
	const valid = `{"hostname_key": "kubernetes.io/hostname", "zone_label": "zone", "workloads": {"redis": {
		"match_labels": {"app": "redis"}, "cluster_label": "instance",
		"roles": {"master": [{"role": "master"}], "replica": [{"role": "replica"}]},
		"separate": [{"name": "masters", "role": "master", "peer_role": "master", "scope": "cluster"}]}}}`
	tests := []struct {
		name   string
		config string
		want   []string // each must appear in the error; none: compiles
	}{
		{"valid", valid, nil},
		{"unknown key", strings.Replace(valid, `"zone_label"`, `"zone_lable"`, 1),
			[]string{"Additional property zone_lable is not allowed", "zone_label is required"}},
		{"misspelt role", strings.Replace(valid, `"peer_role": "master"`, `"peer_role": "mastre"`, 1),
			[]string{`workloads.redis.separate[0]: peer_role "mastre" is not a role of the workload (roles: *, master, replica)`}},
		{"misspelt scope", strings.Replace(valid, `"scope": "cluster"`, `"scope": "nodes"`, 1),
			[]string{`workloads.redis.separate.0.scope must be one of the following: "cluster", "shard"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(context.Background(), readFS(t, defaultWithData(t, tt.config), false))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Compile() error = %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Compile() accepted the data, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Compile() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
