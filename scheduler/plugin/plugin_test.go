package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

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
		{name: "none", want: defaults(Args{})},
		{name: "some", raw: `{"policy":"/etc/regosched/bundle.tar.gz","policyData":"/etc/regosched/data.yaml","logLevel":"debug","syncTimeout":"30s"}`,
			want: defaults(Args{Policy: "/etc/regosched/bundle.tar.gz", PolicyData: "/etc/regosched/data.yaml", LogLevel: "debug", SyncTimeout: "30s"})},
		{name: "a bundle server, signed", raw: `{"policy":"https://bundles.example/regosched.tar.gz","policyMinDelay":"60s","policyMaxDelay":"120s",` +
			`"policyBearerTokenFile":"/var/run/token","policyCACert":"/etc/ca.pem","policyVerificationKey":"/etc/key.pem",` +
			`"policyVerificationKeyID":"k1","policySigningAlg":"ES256","policyScope":"prod","policyRunTests":true,` +
			`"policyMaxBytes":1000,"policyMaxTotalBytes":2000,"policyMaxEntries":30,"policyInsecure":false,"policyStartTimeout":"1m","policyLongPollingTimeout":"30s","policyPoll":"0s"}`,
			want: Args{Policy: "https://bundles.example/regosched.tar.gz", PolicyMinDelay: "60s", PolicyMaxDelay: "120s",
				PolicyBearerTokenFile: "/var/run/token", PolicyCACert: "/etc/ca.pem", PolicyVerificationKey: "/etc/key.pem",
				PolicyVerificationKeyID: "k1", PolicySigningAlg: "ES256", PolicyScope: "prod", PolicyRunTests: true,
				PolicyMaxBytes: 1000, PolicyMaxTotalBytes: 2000, PolicyMaxEntries: 30, PolicyStartTimeout: "1m",
				PolicyLongPollingTimeout: "30s", PolicyPoll: "0s", LogLevel: "info", SyncTimeout: "2m"}},
		{name: "a shadow policy", raw: `{"shadowPolicy":"/etc/regosched/next.tar.gz"}`, want: defaults(Args{ShadowPolicy: "/etc/regosched/next.tar.gz"})},
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

// defaults fills a's empty fields with the plugin's own defaults; the
// policy's are settings', which config takes.
func defaults(a Args) Args {
	if a.LogLevel == "" {
		a.LogLevel = "info"
	}
	if a.SyncTimeout == "" {
		a.SyncTimeout = "2m"
	}
	return a
}

func TestArgsConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    Args
		wantErr string
	}{
		{name: "defaults", args: defaults(Args{})},
		{name: "a negative poll", args: defaults(Args{PolicyPoll: "-1s"}), wantErr: `policyPoll "-1s" is not a non-negative duration`},
		{name: "no sync timeout", args: defaults(Args{SyncTimeout: "0s"}), wantErr: `syncTimeout "0s" is not a positive duration`},
		{name: "not a duration", args: defaults(Args{PolicyMaxDelay: "soon"}), wantErr: `policyMaxDelay "soon" is not a non-negative duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.args.config(nil, logrus.New())
			if got := fmt.Sprint(err); (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && !strings.Contains(got, tt.wantErr)) {
				t.Errorf("config() error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestDeployedConfigExamples: the commented examples of shadowPolicy and
// decisionLog in deploy/plugin/kube-scheduler-config.yaml, uncommented,
// are args the plugin takes, so that copying them cannot stop the
// scheduler with an unknown field.
func TestDeployedConfigExamples(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "plugin", "kube-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.Lines(string(raw)) {
		// The examples are the args' comments that are YAML: "# key: value"
		// under args, and their nested "#   key: value".
		if rest, ok := strings.CutPrefix(line, "          # "); ok && (strings.HasPrefix(rest, "shadowPolicy:") ||
			strings.HasPrefix(rest, "decisionLog:") || strings.HasPrefix(rest, "  ")) {
			lines = append(lines, rest)
		}
	}
	args, err := decodeArgs(&runtime.Unknown{Raw: []byte(strings.Join(lines, "")), ContentType: runtime.ContentTypeJSON})
	if err != nil {
		t.Fatalf("the examples:\n%s\n%v", strings.Join(lines, ""), err)
	}
	if args.ShadowPolicy == "" || args.DecisionLog == nil || args.DecisionLog.Target == "" || args.DecisionLog.BearerTokenFile == "" {
		t.Errorf("examples read %+v, decisionLog %+v: want shadowPolicy and every decisionLog setting", args, args.DecisionLog)
	}
}
