package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/plumbing/version"
)

// TestBinary builds regosched as a release is built, stamping only the
// commit, and runs the binary: what a test binary cannot show (its build
// info has no dependencies, so no Kubernetes version) and what main itself
// does with exit codes.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "regosched")
	build := exec.CommandContext(t.Context(), "go", "build",
		"-ldflags", "-X github.com/regosched/regosched/internal/plumbing/version.commit="+commit, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	release := readRelease(t)
	kubernetes := version.KubernetesMinor(goModVersion(t, "k8s.io/client-go"))
	if kubernetes == "unknown" {
		t.Fatalf("go.mod's client-go %s names no Kubernetes minor", goModVersion(t, "k8s.io/client-go"))
	}

	exe := func(t *testing.T, args ...string) (code int, stdout, stderr string) {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			code = exit.ExitCode()
		default:
			t.Fatalf("running %s: %v", bin, err)
		}
		return code, out.String(), errOut.String()
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		// check looks at standard output; wantErr is standard error, whole.
		check   func(t *testing.T, stdout string)
		wantErr string
	}{
		{name: "--version", args: []string{"--version"}, check: func(t *testing.T, stdout string) {
			want := "regosched " + release + " (commit " + commit
			if !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, ", Kubernetes API "+kubernetes+")\n") {
				t.Errorf("got %q, want %q... Kubernetes API %s)", stdout, want, kubernetes)
			}
		}},
		{name: "version -o json", args: []string{"version", "-o", "json"}, check: func(t *testing.T, stdout string) {
			var got version.Info
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("%v in\n%s", err, stdout)
			}
			want := version.Info{Version: release, Commit: commit, Kubernetes: kubernetes, Platform: runtime.GOOS + "/" + runtime.GOARCH}
			// The Go version and the checkout's state are the builder's.
			got.GoVersion, got.Modified = "", false
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		}},
		{name: "--help", args: []string{"--help"}, check: contains("Exit codes:")},
		{name: "serve --help", args: []string{"serve", "--help"}, check: contains("      --listen string ")},
		{name: "unknown flag", args: []string{"audit", "--nope"}, wantCode: exitUsage,
			wantErr: "regosched: unknown flag: --nope\nRun 'regosched audit --help' for usage.\n"},
		{name: "completion bash", args: []string{"completion", "bash"}, check: contains("# bash completion V2 for regosched")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := exe(t, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr)
			}
			if diff := cmp.Diff(tc.wantErr, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, stdout)
			}
		})
	}
}

// contains checks that standard output has want.
func contains(want string) func(*testing.T, string) {
	return func(t *testing.T, stdout string) {
		t.Helper()
		if !strings.Contains(stdout, want) {
			t.Errorf("standard output lacks %q:\n%s", want, stdout)
		}
	}
}

// readRelease is the repository's VERSION.
func readRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// goModVersion is the version go.mod requires of module path.
func goModVersion(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if fields := strings.Fields(lines.Text()); len(fields) >= 2 && fields[0] == path {
			return fields[1]
		}
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("go.mod requires no %s", path)
	return ""
}
