package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeVerifySuite writes a suite of cases on a copy of
// testdata/snapshots/cluster.yaml beside it, in a temporary directory.
func writeVerifySuite(t *testing.T, cases string) string {
	t.Helper()
	snap, err := os.ReadFile(snapshotDir + "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), snap, 0o600); err != nil {
		t.Fatal(err)
	}
	return writeSuiteOn(t, dir, "cluster.yaml", cases)
}

// writeSuiteOn writes a suite of cases on snapshot to dir.
func writeSuiteOn(t *testing.T, dir, snapshot, cases string) string {
	t.Helper()
	path := filepath.Join(dir, "suite.yaml")
	body := "apiVersion: regosched.io/v1alpha1\nkind: Suite\nmetadata: {name: es}\nsnapshot: " + snapshot + "\ncases:\n" + cases
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVerify: exit 0 when every expectation holds, 1 with want and got when
// one fails, 2 when a suite cannot run, 64 on usage; no kubeconfig is read.
func TestVerify(t *testing.T) {
	noKubeconfig(t)
	passing := writeVerifySuite(t, "- {name: data apart, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-a], others: denied}}\n")
	// A deliberately wrong expectation: node-b holds a data pod of the
	// cluster.
	wrong := writeVerifySuite(t, "- {name: data apart, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-b]}}\n")
	noPod := writeVerifySuite(t, "- {name: data apart, pod: search/nothing, expect: {allowed: [node-b]}}\n")
	absolute, err := filepath.Abs(snapshotDir + "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	outside := writeSuiteOn(t, t.TempDir(), absolute, "- {name: data apart, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-a]}}\n")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		// stdout and stderr hold these.
		wantStdout, wantStderr []string
	}{
		{
			name: "passes", args: []string{"verify", passing},
			wantStdout: []string{"es     data apart  search/logs-elasticsearch-data-2  ok (2 checks)", "2 checks passed, 0 failed, 0 could not run."},
		},
		{
			name: "a wrong expectation fails with want and got", args: []string{"verify", wrong}, wantCode: exitViolations,
			wantStdout: []string{
				"FAIL (1 of 1 checks)",
				"FAIL es/data apart: node-b allowed\n  want: allowed\n  got:  denied by elasticsearch-data (peer search/logs-elasticsearch-data-0) (unresolvable)\n",
			},
		},
		{
			name: "a pod not in the snapshot cannot run", args: []string{"verify", noPod}, wantCode: exitFailure,
			wantStdout: []string{"ERROR es/data apart (" + noPod + "): pod search/nothing is not in the snapshot"},
			wantStderr: []string{"regosched: 1 suites or cases could not run; see the report\n"},
		},
		{
			name: "a snapshot outside the suite's directory cannot run", args: []string{"verify", outside}, wantCode: exitFailure,
			wantStdout: []string{"ERROR es (" + outside + "): snapshot " + absolute + ": an absolute path, outside the suite's directory; give --allow-outside-suite to read it"},
			wantStderr: []string{"regosched: 1 suites or cases could not run; see the report\n"},
		},
		{
			name: "--allow-outside-suite reads it", args: []string{"verify", outside, "--allow-outside-suite"},
			wantStdout: []string{"es     data apart  search/logs-elasticsearch-data-2  ok (1 checks)"},
		},
		{
			name: "a missing suite", args: []string{"verify", "none.yaml"}, wantCode: exitFailure,
			wantStderr: []string{"regosched: suite: stat none.yaml: no such file or directory\n"},
		},
		{
			name: "--run selects nothing", args: []string{"verify", passing, "--run", "^nothing$"}, wantCode: exitFailure,
			wantStderr: []string{`regosched: no check ran (--run "^nothing$" selects no case)`},
		},
		{name: "no suite", args: []string{"verify"}, wantCode: exitUsage, wantStderr: []string{"verify: give at least one suite file or directory"}},
		{name: "bad output", args: []string{"verify", passing, "-o", "yaml"}, wantCode: exitUsage, wantStderr: []string{"want table, json or junit"}},
		{name: "bad --run", args: []string{"verify", passing, "--run", "("}, wantCode: exitUsage, wantStderr: []string{"--run: error parsing regexp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout, stderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if len(tt.wantStderr) == 0 && stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
		})
	}
}

// TestVerifyJUnit: -o junit is XML that CI reporters read, with the
// failure's want and got.
func TestVerifyJUnit(t *testing.T) {
	noKubeconfig(t)
	path := writeVerifySuite(t, `- {name: passes, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-a]}}
- {name: fails, pod: search/logs-elasticsearch-data-2, expect: {allowed: [node-c]}}
`)
	code, stdout, stderr := runCmd(t, "verify", path, "-o", "junit")
	if code != exitViolations {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitViolations, stderr)
	}
	var got struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not XML: %v\n%s", err, stdout)
	}
	if got.Tests != 2 || got.Failures != 1 || len(got.Suites) != 1 || got.Suites[0].Name != "es" {
		t.Fatalf("tests %d, failures %d, suites %+v", got.Tests, got.Failures, got.Suites)
	}
	if f := got.Suites[0].Cases[1].Failure; f == nil || !strings.Contains(f.Text, "node-c allowed\n  want: allowed\n  got:  denied by elasticsearch-data") {
		t.Errorf("failure %+v lacks want and got", f)
	}
}
