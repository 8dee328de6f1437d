package main

import (
	"strings"
	"testing"
)

// Flags that name no setting are refused before anything starts.
func TestServeRefusesFlagValues(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--soft-rules=score"}, `--soft-rules: want prioritize or filter, got "score"`},
		{[]string{"--log-format=xml"}, "--log-format: want text or json"},
		// Parsed, then refused: no client certificate is asked for.
		{[]string{"--tls-allowed-client-names=regosched-scheduler"}, "--tls-allowed-client-names needs --tls-cert-file and --client-ca-file"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := runServe(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("runServe(%v) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}
