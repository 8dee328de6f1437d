package localcluster

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

func TestParseGoList(t *testing.T) {
	tests := []struct {
		name         string
		out          string
		wantDeps     []string
		wantExpected int
		wantErr      bool
	}{
		{
			name: "cold, warm and link-only packages",
			out: "internal/abi\tfalse\t\n" +
				"k8s.io/api/core/v1\ttrue\tbuild ID mismatch\n" +
				"k8s.io/client-go/rest\ttrue\tstale dependency: k8s.io/api/core/v1\n" +
				"k8s.io/kubernetes/cmd/kubectl\ttrue\t" + cachedStaleReason + "\n",
			wantDeps:     []string{"internal/abi", "k8s.io/api/core/v1", "k8s.io/client-go/rest", "k8s.io/kubernetes/cmd/kubectl"},
			wantExpected: 2,
		},
		{name: "nothing", out: "", wantDeps: nil, wantExpected: 0},
		{name: "not the format", out: "internal/abi false\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deps, expected, err := parseGoList(tt.out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseGoList() error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantDeps, deps); diff != "" {
				t.Errorf("parseGoList() deps mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantExpected, expected); diff != "" {
				t.Errorf("parseGoList() expected mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildProgressCounts feeds go build -v output in arbitrary chunks and
// checks what is counted and what is kept for an error message.
func TestBuildProgressCounts(t *testing.T) {
	deps := []string{"a/b", "a/c", "k8s.io/kubernetes/cmd/kubectl"}
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		deps       []string
		expected   int
		chunks     []string
		at         time.Duration
		wantMsg    string
		wantOutput string
	}{
		{
			name:     "part way",
			deps:     deps,
			expected: 3,
			chunks:   []string{"go: downloading a v1.0.0\na/", "b\n", "a/b\n"},
			at:       80 * time.Second,
			wantMsg:  "building kubectl: 1/3 packages (1m20s)",
			// A package named twice counts once; the download line is kept.
			wantOutput: "go: downloading a v1.0.0",
		},
		{
			name:     "everything compiled: linking",
			deps:     deps,
			expected: 3,
			chunks:   []string{"a/b\na/c\r\nk8s.io/kubernetes/cmd/kubectl\n"},
			at:       200 * time.Second,
			wantMsg:  "building kubectl: 3/3 packages, linking (3m20s)",
		},
		{
			name:    "nothing to compile",
			deps:    deps,
			chunks:  nil,
			at:      4 * time.Second,
			wantMsg: "building kubectl: every package is in the build cache, linking (4s)",
		},
		{
			name:     "more compiled than go list expected",
			deps:     deps,
			expected: 1,
			chunks:   []string{"a/b\na/c\n"},
			at:       time.Second,
			wantMsg:  "building kubectl: 2/2 packages, linking (1s)",
		},
		{
			name:     "a line naming no package of the build is kept, not counted",
			deps:     deps,
			expected: 3,
			chunks:   []string{"# a/c\n", "c.go:1:1: syntax error\n", "other/pkg\n", "unterminated"},
			at:       time.Second,
			wantMsg:  "building kubectl: 0/3 packages (1s)",
			// The unterminated last line is part of the output too.
			wantOutput: "# a/c\nc.go:1:1: syntax error\nother/pkg\nunterminated",
		},
		{
			name:       "go list failed: lines shaped like import paths count",
			deps:       nil,
			chunks:     []string{"a/b\nx/y/z\n", "go: downloading a v1\n", "# a/c\n", "c.go:3: bad\n"},
			at:         12 * time.Second,
			wantMsg:    "building kubectl: 2 packages compiled (12s)",
			wantOutput: "go: downloading a v1\n# a/c\nc.go:3: bad",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			p := newBuildProgress(log, "kubectl", tt.deps, tt.expected, start)
			for _, c := range tt.chunks {
				if n, err := p.Write([]byte(c)); err != nil || n != len(c) {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", c, n, err, len(c))
				}
			}
			if diff := cmp.Diff(tt.wantMsg, p.message(start.Add(tt.at))); diff != "" {
				t.Errorf("message() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOutput, p.output()); diff != "" {
				t.Errorf("output() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildProgressThrottles ticks a progress follower at fake times and
// checks that it logs once per interval, whatever the tick rate.
func TestBuildProgressThrottles(t *testing.T) {
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		ticks []time.Duration // after start
		want  []string
	}{
		{name: "nothing before the first interval", ticks: []time.Duration{time.Second, 9 * time.Second}, want: nil},
		{
			name:  "a tick a second logs every ten",
			ticks: []time.Duration{1 * time.Second, 9 * time.Second, 10 * time.Second, 11 * time.Second, 19 * time.Second, 20 * time.Second, 21 * time.Second},
			want:  []string{"building etcd: 1/4 packages (10s)", "building etcd: 1/4 packages (20s)"},
		},
		{
			// The interval counts from the last line, not from a grid.
			name:  "late ticks",
			ticks: []time.Duration{15 * time.Second, 24 * time.Second, 26 * time.Second},
			want:  []string{"building etcd: 1/4 packages (15s)", "building etcd: 1/4 packages (26s)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, hook := logtest.NewNullLogger()
			p := newBuildProgress(log, "etcd", []string{"a", "b", "c", "d"}, 4, start)
			if _, err := p.Write([]byte("a\n")); err != nil {
				t.Fatal(err)
			}
			for _, d := range tt.ticks {
				p.tick(start.Add(d))
			}
			var got []string
			for _, e := range hook.AllEntries() {
				if e.Level != logrus.InfoLevel {
					t.Errorf("logged at %s: %s", e.Level, e.Message)
				}
				got = append(got, e.Message)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("logged lines mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildProgressKeepsTheEnd checks that only the last lines of a long
// output are kept for an error message.
func TestBuildProgressKeepsTheEnd(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	p := newBuildProgress(log, "etcd", []string{"a"}, 1, time.Now())
	var b strings.Builder
	for i := range keptOutputLines + 10 {
		b.WriteString("go: downloading m" + strings.Repeat("x", i) + " v1\n")
	}
	if _, err := p.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(p.output(), "\n")
	if len(lines) != keptOutputLines {
		t.Fatalf("kept %d lines, want %d", len(lines), keptOutputLines)
	}
	if want := "go: downloading m" + strings.Repeat("x", keptOutputLines+9) + " v1"; lines[len(lines)-1] != want {
		t.Errorf("last kept line = %q, want %q", lines[len(lines)-1], want)
	}
}
