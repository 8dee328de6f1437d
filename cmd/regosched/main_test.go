package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/plumbing/version"
)

// TestExitCodes: help is no error, a mistyped call is a usage error (64)
// with one error line and a pointer to --help, never the whole usage.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		// wantOut is in standard output; wantErr is standard error, whole.
		wantOut, wantErr string
	}{
		{name: "--help", args: []string{"--help"}, wantOut: "Exit codes:\n  0 "},
		{name: "-h", args: []string{"-h"}, wantOut: "Available Commands:"},
		{name: "help", args: []string{"help"}, wantOut: "64  usage error"},
		{name: "help serve", args: []string{"help", "serve"}, wantOut: "--listen string"},
		{name: "serve --help", args: []string{"serve", "--help"}, wantOut: "--policy-poll duration"},
		{name: "audit -h", args: []string{"audit", "-h"}, wantOut: "-n, --namespace string"},
		{name: "no command", wantCode: exitUsage,
			wantErr: "regosched: no command given (serve, audit, explain, verify, version, completion)\nRun 'regosched --help' for usage.\n"},
		{name: "unknown command", args: []string{"serv", "--listen=:1"}, wantCode: exitUsage,
			wantErr: "regosched: unknown command \"serv\" for \"regosched\"; did you mean \"serve\"?\nRun 'regosched --help' for usage.\n"},
		{name: "unknown command, nothing near", args: []string{"frobnicate"}, wantCode: exitUsage,
			wantErr: "regosched: unknown command \"frobnicate\" for \"regosched\"\nRun 'regosched --help' for usage.\n"},
		{name: "unknown flag", args: []string{"--nope"}, wantCode: exitUsage,
			wantErr: "regosched: unknown flag: --nope\nRun 'regosched --help' for usage.\n"},
		{name: "a flag of another command", args: []string{"version", "--listen=:1"}, wantCode: exitUsage,
			wantErr: "regosched: unknown flag: --listen\nRun 'regosched version --help' for usage.\n"},
		{name: "missing value", args: []string{"serve", "--listen"}, wantCode: exitUsage,
			wantErr: "regosched: flag needs an argument: --listen\nRun 'regosched serve --help' for usage.\n"},
		{name: "bad value", args: []string{"serve", "--kube-api-burst=many"}, wantCode: exitUsage,
			wantErr: "regosched: invalid argument \"many\" for \"--kube-api-burst\" flag: must be an integer\nRun 'regosched serve --help' for usage.\n"},
		{name: "serve takes no arguments", args: []string{"serve", "now"}, wantCode: exitUsage,
			wantErr: "regosched: serve takes no arguments, got [\"now\"]\nRun 'regosched serve --help' for usage.\n"},
		{name: "version -o", args: []string{"version", "-o", "xml"}, wantCode: exitUsage,
			wantErr: "regosched: -o: unknown output format \"xml\": want json or yaml\nRun 'regosched version --help' for usage.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tc.args...)
			if code != tc.wantCode {
				t.Errorf("regosched %q: exit %d, want %d; stderr:\n%s", tc.args, code, tc.wantCode, stderr)
			}
			if !strings.Contains(stdout, tc.wantOut) {
				t.Errorf("regosched %q: stdout lacks %q:\n%s", tc.args, tc.wantOut, stdout)
			}
			if diff := cmp.Diff(tc.wantErr, stderr); diff != "" {
				t.Errorf("regosched %q: stderr (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// TestVersion: --version and version print the one line; -o json and
// yaml the fields.
func TestVersion(t *testing.T) {
	info := version.Get()
	fromJSON := func(s string) (version.Info, error) {
		var got version.Info
		err := json.Unmarshal([]byte(s), &got)
		return got, err
	}
	fromYAML := func(s string) (version.Info, error) {
		var got version.Info
		err := yaml.UnmarshalStrict([]byte(s), &got)
		return got, err
	}
	for _, tc := range []struct {
		args  []string
		parse func(string) (version.Info, error) // nil: the one line
	}{
		{args: []string{"--version"}},
		{args: []string{"version"}},
		{args: []string{"version", "-o", "json"}, parse: fromJSON},
		{args: []string{"version", "--output=yaml"}, parse: fromYAML},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tc.args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if tc.parse == nil {
				if diff := cmp.Diff(info.String()+"\n", stdout); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			got, err := tc.parse(stdout)
			if err != nil {
				t.Fatalf("%v in\n%s", err, stdout)
			}
			if diff := cmp.Diff(info, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompletion: the shells' scripts, and the values of the enum flags
// and of --context.
func TestCompletion(t *testing.T) {
	kubeconfig := fakeAPIServer(t, nil, nil)
	for _, tc := range []struct {
		name string
		args []string
		// want is in the output, whole lines.
		want string
	}{
		{name: "bash", args: []string{"completion", "bash"}, want: "# bash completion V2 for regosched"},
		{name: "zsh", args: []string{"completion", "zsh"}, want: "#compdef regosched"},
		{name: "fish", args: []string{"completion", "fish"}, want: "# fish completion for regosched"},
		{name: "powershell", args: []string{"completion", "powershell"}, want: "# powershell completion for regosched"},
		{name: "commands", args: []string{"__complete", ""}, want: "serve\tServe the extender"},
		{name: "serve --log-level", args: []string{"__complete", "serve", "--log-level", ""}, want: "debug\ninfo\nwarn\nerror\n:4\n"},
		{name: "serve --log-format", args: []string{"__complete", "serve", "--log-format", ""}, want: "text\njson\n:4\n"},
		{name: "serve --soft-rules", args: []string{"__complete", "serve", "--soft-rules", ""}, want: "filter\nprioritize\n:4\n"},
		{name: "serve --repair", args: []string{"__complete", "serve", "--repair", ""}, want: "off\nplan\non\n:4\n"},
		{name: "audit -o", args: []string{"__complete", "audit", "-o", ""}, want: "table\njson\n:4\n"},
		{name: "explain --log-level", args: []string{"__complete", "explain", "--log-level", ""}, want: "debug\ninfo\nwarn\nerror\n:4\n"},
		{name: "version -o", args: []string{"__complete", "version", "-o", ""}, want: "json\nyaml\n:4\n"},
		{name: "audit --context", args: []string{"__complete", "audit", "--kubeconfig", kubeconfig, "--context", ""}, want: "shop\nx\n:4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, _ := runCmd(t, tc.args...)
			if code != exitOK || !strings.Contains("\n"+stdout, "\n"+tc.want) {
				t.Errorf("regosched %q: exit %d, want 0 and output containing %q:\n%s", tc.args, code, tc.want, stdout)
			}
		})
	}
}
