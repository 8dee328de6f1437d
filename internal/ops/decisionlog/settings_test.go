package decisionlog

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSettings: both builds' settings are checked here, and errors name
// each setting as the operator wrote it (Names).
func TestSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "decisions.log")
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := func(setting string) string { return "<" + setting + ">" }
	tests := []struct {
		name     string
		settings Settings
		wantErr  string
		want     Config // Sink not compared
		sink     string
	}{
		{name: "stdout", settings: Settings{Target: Stdout, SampleRate: 1}, want: Config{SampleRate: 1}, sink: "*decisionlog.WriterSink"},
		{
			name:     "a file, with defaults of the HTTP settings let be",
			settings: Settings{Target: file, SampleRate: 0.5, MaskLabels: []string{"team"}, MaskMode: "replace", BufferEvents: 9, FlushInterval: time.Second, Timeout: DefaultTimeout, MaxRetries: 5},
			want:     Config{SampleRate: 0.5, MaskLabels: []string{"team"}, MaskMode: MaskReplace, MaxEvents: 9, FlushInterval: time.Second},
			sink:     "*decisionlog.FileSink",
		},
		{name: "an OPA service", settings: Settings{Target: "https://logs.example", SampleRate: 1, BearerTokenFile: "/t"}, want: Config{SampleRate: 1}, sink: "*decisionlog.HTTPSink"},
		{name: "a token over http, insecure", settings: Settings{Target: "http://logs.example", BearerTokenFile: "/t", Insecure: true}, sink: "*decisionlog.HTTPSink"},
		{name: "sample above 1", settings: Settings{Target: Stdout, SampleRate: 1.5}, wantErr: "<sample> 1.5: want a share between 0 and 1"},
		{name: "sample NaN", settings: Settings{Target: Stdout, SampleRate: math.NaN()}, wantErr: "<sample> NaN: want a share between 0 and 1"},
		{name: "a mask mode", settings: Settings{Target: Stdout, MaskMode: "hash"}, wantErr: `<maskMode> "hash": want drop or replace`},
		{name: "a negative buffer", settings: Settings{Target: Stdout, BufferEvents: -1}, wantErr: "<bufferSize> cannot be negative"},
		{name: "negative retries", settings: Settings{Target: "https://logs.example", MaxRetries: -1}, wantErr: "<maxRetries> cannot be negative"},
		{name: "another scheme", settings: Settings{Target: "ftp://logs.example"}, wantErr: `<target> "ftp://logs.example": want stdout, a file path or an http(s):// URL`},
		{name: "no host", settings: Settings{Target: "https://"}, wantErr: `<target> "https://": no host`},
		{name: "a CA for a file", settings: Settings{Target: file, CACertFile: notPEM}, wantErr: "<caCert> is for an http(s):// <target>"},
		{name: "a token in clear", settings: Settings{Target: "http://logs.example", BearerTokenFile: "/t"}, wantErr: "<bearerTokenFile> with an http:// <target> would send the token in clear: use https, or <insecure>"},
		{name: "a CA file with no certificate", settings: Settings{Target: "https://logs.example", CACertFile: notPEM}, wantErr: "<caCert> " + notPEM + ": no PEM certificate in it"},
		{name: "a file that cannot be opened", settings: Settings{Target: filepath.Join(dir, "none", "log")}, wantErr: "<target>: decisionlog: open log file"},
		{name: "off", settings: Settings{}, wantErr: "decisionlog: no target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.settings.Config(name)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("Config() error = %v, want one starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sink := got.Sink
			t.Cleanup(func() { _ = sink.Close() })
			if gotSink := fmt.Sprintf("%T", got.Sink); gotSink != tt.sink {
				t.Errorf("sink = %s, want %s", gotSink, tt.sink)
			}
			got.Sink = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Config() (-want +got):\n%s", diff)
			}
		})
	}
}
