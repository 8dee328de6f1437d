package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	k8sversion "k8s.io/component-base/version"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/plumbing/version"
)

func TestVersionFlag(t *testing.T) {
	want := version.Get().String() + "\nKubernetes " + k8sversion.Get().String() + "\n"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bare flag", []string{"--version"}},
		{"explicit true", []string{"--version=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := newCommand(prometheus.NewRegistry())
			cmd.SetArgs(tc.args)
			cmd.SetOut(&out)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			if diff := cmp.Diff(want, out.String()); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tc.args, diff)
			}
			if !strings.HasPrefix(out.String(), "regosched "+regosched.Version()+" ") {
				t.Errorf("%v: the first line does not name regosched %s: %q", tc.args, regosched.Version(), out.String())
			}
		})
	}
}

func TestHelpNamesTheCommand(t *testing.T) {
	var out bytes.Buffer
	cmd := newCommand(prometheus.NewRegistry())
	cmd.SetArgs([]string{"--help"})
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("--help: %v", err)
	}
	if !strings.Contains(out.String(), "regosched-scheduler [flags]") {
		t.Errorf("--help does not name regosched-scheduler:\n%s", out.String())
	}
}
