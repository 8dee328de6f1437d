package settings

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// all lists every setting, over fresh values.
func all() []Setting {
	var path string
	list := append(Policy(&bundles.Config{}), ShadowPolicy(&path))
	return append(list, DecisionLog(&decisionlog.Settings{})...)
}

// TestNamesOnce: no flag, arg or field is named twice, and each setting
// has its help.
func TestNamesOnce(t *testing.T) {
	seen := map[string]string{}
	for _, s := range all() {
		for _, key := range []string{"flag " + s.Flag, "arg " + s.Arg, fmt.Sprintf("field %p", s.Value)} {
			if other, ok := seen[key]; ok {
				t.Errorf("%s: %s is also %s's", s.Flag, key, other)
			}
			seen[key] = s.Flag
		}
		if s.Flag == "" || s.Arg == "" || s.Usage == "" {
			t.Errorf("%+v: want a flag, an arg and a help", s)
		}
	}
}

// TestDefaults: the defaults are the ones serve's flags and the plugin's
// args have always had.
func TestDefaults(t *testing.T) {
	tests := []struct {
		name      string
		got, want any
	}{
		{"policy", DefaultPolicy(), bundles.Config{
			Poll: 2 * time.Second, MinDelay: 10 * time.Second, MaxDelay: 20 * time.Second, StartTimeout: 30 * time.Second,
			VerificationKeyID: "default", SigningAlg: "RS256", MaxBytes: bundles.DefaultBundleSizeLimit,
			MaxTotalBytes: bundles.DefaultBundleTotalLimit, MaxEntries: bundles.DefaultBundleMaxEntries,
		}},
		// The plugin leaves all but the sample and the retries at zero,
		// which decisionlog reads as these same defaults.
		{"decision log", DefaultDecisionLog(), decisionlog.Settings{
			SampleRate: 1, MaskMode: string(decisionlog.MaskDrop), BufferEvents: decisionlog.DefaultMaxEvents,
			FlushInterval: decisionlog.DefaultFlushInterval, UploadLimitBytes: decisionlog.DefaultUploadSizeLimitBytes,
			Timeout: decisionlog.DefaultTimeout, MaxRetries: decisionlog.DefaultMaxRetries,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("defaults (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFlagOf(t *testing.T) {
	list := DecisionLog(&decisionlog.Settings{})
	tests := []struct{ arg, want string }{
		{decisionlog.SettingTarget, "--decision-log"},
		{decisionlog.SettingBufferSize, "--decision-log-buffer-size"},
		{"nothing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			if got := FlagOf(list, tt.arg); got != tt.want {
				t.Errorf("FlagOf(%q) = %q, want %q", tt.arg, got, tt.want)
			}
		})
	}
}
