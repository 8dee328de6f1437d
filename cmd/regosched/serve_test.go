package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/frontend/serve"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/ops/repair"
	"github.com/regosched/regosched/internal/plumbing/version"
)

// Flags that name no setting are refused, as usage errors, before anything
// starts.
func TestServeRefusesFlagValues(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--soft-rules=score"}, `--soft-rules: want prioritize or filter, got "score"`},
		{[]string{"--log-format=xml"}, "--log-format: want text or json"},
		{[]string{"--tls-allowed-client-names-typo=x"}, "unknown flag: --tls-allowed-client-names-typo"},
		{[]string{"--repair=yes"}, `--repair="yes": want off, plan or on`},
		{[]string{"--log-level=loud"}, `--log-level: not a valid logrus Level: "loud"`},
		{[]string{"--policy-poll=often"}, `invalid argument "often" for "--policy-poll" flag`},
		{[]string{"extra"}, `serve takes no arguments, got ["extra"]`},
		{[]string{"--decision-log-mask-mode=hash"}, `--decision-log-mask-mode: want drop or replace, got "hash"`},
		{[]string{"--decision-log-sample=1.5"}, "--decision-log-sample: want a share between 0 and 1, got 1.5"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseServe(tt.args)
			var usage *usageError
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &usage) {
				t.Errorf("parseServe(%v) = %v, want a usage error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// The flags deploy/ and the chart pass reach the options they name
// (deploy/tls/mtls passes --tls-allowed-client-names: a binary without it
// would not start).
func TestServeFlagsReachOptions(t *testing.T) {
	tests := []struct {
		args []string
		got  func(serve.Options) any
		want any
	}{
		{[]string{"--tls-allowed-client-names=regosched-scheduler, spiffe://x/sa/kube-scheduler,"},
			func(o serve.Options) any { return o.TLS.AllowedClientNames },
			[]string{"regosched-scheduler", "spiffe://x/sa/kube-scheduler"}},
		{[]string{"--redis-password-namespaces=cache,shop"},
			func(o serve.Options) any { return o.RedisRoles.PasswordNamespaces }, []string{"cache", "shop"}},
		{[]string{"--redis-password-insecure"},
			func(o serve.Options) any { return o.RedisRoles.PasswordInsecure }, true},
		{[]string{"--policy-ca-cert=/etc/ca.pem"},
			func(o serve.Options) any { return o.Policy.CACertFile }, "/etc/ca.pem"},
		{[]string{"--policy-max-total-bytes=1024", "--policy-max-entries=7"},
			func(o serve.Options) any { return []any{o.Policy.MaxTotalBytes, o.Policy.MaxEntries} }, []any{int64(1024), 7}},
		{[]string{"--repair=plan", "--repair-max-per-hour=2", "--repair-timeout=1m", "--repair-cooldown=30s", "--repair-max-lag-bytes=10", "--repair-configmap=x"},
			func(o serve.Options) any { return o.Repair },
			serve.RepairOptions{Mode: repair.Plan, MaxPerHour: 2, Timeout: time.Minute, Cooldown: 30 * time.Second, MaxLagBytes: 10, ConfigMap: "x"}},
		{nil, func(o serve.Options) any { return o.Repair.Mode }, repair.Off},
		// The verbs are on unless regosched runs beside regosched-scheduler.
		{nil, func(o serve.Options) any { return o.Verbs }, true},
		{[]string{"--verbs=false"}, func(o serve.Options) any { return o.Verbs }, false},
		{[]string{"--policy=/etc/b.tar.gz", "--policy-data=/etc/d.json", "--policy-poll=5s"},
			func(o serve.Options) any { return []any{o.Policy.Path, o.Policy.DataFile, o.Policy.Poll} },
			[]any{"/etc/b.tar.gz", "/etc/d.json", 5 * time.Second}},
		// deploy/tls/mtls and the chart's TLS pass both.
		{[]string{"--scheduler-client-secret=regosched-scheduler-client-tls", "--scheduler-deployment=regosched-scheduler"},
			func(o serve.Options) any { return o.CertRoll },
			serve.CertRollOptions{Secret: "regosched-scheduler-client-tls", Deployment: "regosched-scheduler"}},
		{[]string{"--kubeconfig=/etc/k", "--context=staging"},
			func(o serve.Options) any { return []string{o.Kubeconfig, o.KubeContext} }, []string{"/etc/k", "staging"}},
		{nil, func(o serve.Options) any { return []string{o.Kubeconfig, o.KubeContext} }, []string{"", ""}},
		// The release of internal/plumbing/version, as /version serves it.
		{nil, func(o serve.Options) any { return o.Version }, version.Get().Version},
		{[]string{"--shadow-policy=/etc/next.tar.gz"}, func(o serve.Options) any { return o.ShadowPolicy }, "/etc/next.tar.gz"},
		{nil, func(o serve.Options) any { return o.ShadowPolicy }, ""},
		{[]string{"--soft-rules=prioritize"}, func(o serve.Options) any { return o.SoftInFilter }, false},
		{nil, func(o serve.Options) any { return o.SoftInFilter }, true},
		{[]string{"--kube-api-background-qps=3", "--kube-api-background-burst=6"},
			func(o serve.Options) any { return []any{o.BackgroundQPS, o.BackgroundBurst} }, []any{float32(3), 6}},
		// Decision logs are off by default, and log every decision once on.
		{nil, func(o serve.Options) any { return o.DecisionLog }, decisionlog.Settings{
			SampleRate: 1, MaskMode: "drop", BufferEvents: 10000, FlushInterval: 5 * time.Second,
			UploadLimitBytes: 32768, Timeout: 10 * time.Second, MaxRetries: 5,
		}},
		{[]string{"--decision-log=https://logs.example:8443/v1", "--decision-log-sample=0.25", "--decision-log-mask-labels=team,owner",
			"--decision-log-mask-mode=replace", "--decision-log-buffer-size=500", "--decision-log-flush-interval=1s",
			"--decision-log-upload-limit-bytes=65536", "--decision-log-timeout=3s", "--decision-log-max-retries=0",
			"--decision-log-ca-cert=/etc/ca.pem", "--decision-log-bearer-token-file=/etc/token", "--decision-log-insecure"},
			func(o serve.Options) any { return o.DecisionLog }, decisionlog.Settings{
				Target: "https://logs.example:8443/v1", SampleRate: 0.25, MaskLabels: []string{"team", "owner"}, MaskMode: "replace",
				BufferEvents: 500, FlushInterval: time.Second, UploadLimitBytes: 65536, Timeout: 3 * time.Second,
				CACertFile: "/etc/ca.pem", BearerTokenFile: "/etc/token", Insecure: true,
			}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			opts, err := parseServe(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tt.got(opts)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
