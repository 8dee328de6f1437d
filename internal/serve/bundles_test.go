package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/regosched/regosched"
)

// TestPolicyChecksAtStart: settings that cannot give a trustworthy policy
// stop regosched before it serves.
func TestPolicyChecksAtStart(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"a verification key with the unsigned embedded policy",
			Options{Bundles: BundleOptions{VerificationKey: "secret", SigningAlg: "HS256"}},
			"the embedded default policy is unsigned"},
		{"an unsigned bundle with a verification key",
			Options{PolicyPath: "../../rego", Bundles: BundleOptions{VerificationKey: "secret", SigningAlg: "HS256"}},
			"bundle missing .signatures.json file"},
		{"a bundle server with no bundle",
			Options{PolicyPath: notFound.URL + "/b.tar.gz", Bundles: BundleOptions{MinDelay: time.Second, MaxDelay: time.Second, StartTimeout: time.Second, Insecure: true}},
			"no policy bundle from " + notFound.URL + "/b.tar.gz within 1s"},
		{"a bearer token over plain http",
			Options{PolicyPath: notFound.URL + "/b.tar.gz", Bundles: BundleOptions{MinDelay: time.Second, MaxDelay: time.Second, StartTimeout: time.Second, BearerTokenFile: "token"}},
			"plain http would send the bearer token in clear text"},
		{"an unsigned bundle over plain http",
			Options{PolicyPath: notFound.URL + "/b.tar.gz", Bundles: BundleOptions{MinDelay: time.Second, MaxDelay: time.Second, StartTimeout: time.Second}},
			"plain http lets anyone on the path replace an unsigned bundle"},
		{"a data overlay on a signed bundle",
			Options{PolicyPath: "../../rego", PolicyData: "data.json", Bundles: BundleOptions{VerificationKey: "secret", SigningAlg: "HS256"}},
			"--policy-data cannot be combined with --policy-verification-key"},
		{"a data overlay that does not exist",
			Options{PolicyData: "missing.json"},
			"reading policy data overlay"},
		{"a bundle file over --policy-max-bytes",
			Options{PolicyPath: "../../rego", Bundles: BundleOptions{MaxBytes: 100}},
			"exceeds the limit of 100 bytes per file (--policy-max-bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			tt.opts.Listen, tt.opts.DefaultPolicy, tt.opts.SchedulerName, tt.opts.Log = freeAddr(t), regosched.DefaultPolicy(), "regosched", log
			err := Run(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
