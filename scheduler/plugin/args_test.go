package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/frontend/settings"
	"github.com/regosched/regosched/internal/frontend/settings/settingstest"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/test/deploytest"
)

// ownArgs are the plugin's args that serve has no flag for.
var ownArgs = []string{"logLevel", "syncTimeout"}

// TestArgsAreSettings: the args are the settings' args, by name, and the
// plugin's own, no more and no fewer; test/deploytest's mirror of them
// (the chart tests', in a module that cannot import this one) is the same.
func TestArgsAreSettings(t *testing.T) {
	args := settingstest.Fields(Args{})
	shared := slices.DeleteFunc(slices.Sorted(maps.Keys(args)), func(name string) bool { return slices.Contains(ownArgs, name) })
	tests := []struct {
		name      string
		got, want any
	}{
		{"the settings' args", shared, settingstest.ArgNames()},
		{"test/deploytest's mirror", settingstest.Fields(deploytest.PluginArgs{}), args},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// TestArgsReachSettings: each arg, set, lands in its setting's field, and
// each arg left out leaves the setting's default, as serve's flags do.
func TestArgsReachSettings(t *testing.T) {
	var setPolicy bundles.Config
	var setShadow string
	var setDecisionLog decisionlog.Settings
	raw := map[string]any{}
	for i, s := range append(settings.Policy(&setPolicy), settings.ShadowPolicy(&setShadow)) {
		raw[s.Arg] = distinct(t, s, i)
	}
	dl := map[string]any{}
	for i, s := range settings.DecisionLog(&setDecisionLog) {
		dl[s.Arg] = distinct(t, s, i)
	}
	raw[settingstest.DecisionLogArg] = dl
	every, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	def := settings.DefaultDecisionLog()
	tests := []struct {
		name        string
		raw         string
		policy      bundles.Config
		shadow      string
		decisionLog *decisionlog.Settings
	}{
		{name: "none", policy: settings.DefaultPolicy()},
		// The sample and the retries take the settings' defaults; the
		// others' zero is decisionlog's own same defaults.
		{name: "a decision log target", raw: `{"decisionLog":{"target":"stdout"}}`, policy: settings.DefaultPolicy(),
			decisionLog: &decisionlog.Settings{Target: "stdout", SampleRate: def.SampleRate, MaxRetries: def.MaxRetries}},
		{name: "every arg", raw: string(every), policy: setPolicy, shadow: setShadow, decisionLog: &setDecisionLog},
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj runtime.Object
			if tt.raw != "" {
				obj = &runtime.Unknown{Raw: []byte(tt.raw), ContentType: runtime.ContentTypeJSON}
			}
			args, err := decodeArgs(obj)
			if err != nil {
				t.Fatal(err)
			}
			// Not config: it would open the decision log's made-up target.
			dl := args.DecisionLog
			args.DecisionLog = nil
			cfg, err := args.config(nil, log)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.policy, cfg.Bundles); diff != "" {
				t.Errorf("policy settings (-want +got):\n%s", diff)
			}
			if cfg.ShadowPolicy != tt.shadow {
				t.Errorf("shadow policy = %q, want %q", cfg.ShadowPolicy, tt.shadow)
			}
			var got *decisionlog.Settings
			if dl != nil {
				set, err := dl.settings(func(s string) string { return "decisionLog." + s })
				if err != nil {
					t.Fatal(err)
				}
				got = &set
			}
			if diff := cmp.Diff(tt.decisionLog, got); diff != "" {
				t.Errorf("decision log settings (-want +got):\n%s", diff)
			}
		})
	}
}

// distinct sets s to a value that is not its default, unique to i, and
// gives it as the arg writes it.
func distinct(t *testing.T, s settings.Setting, i int) any {
	t.Helper()
	switch v := s.Value.(type) {
	case *string:
		*v = fmt.Sprintf("value-%d", i)
		return *v
	case *bool:
		*v = !s.Default.(bool)
		return *v
	case *int:
		*v = 1000 + i
		return *v
	case *int64:
		*v = int64(1000 + i)
		return *v
	case *float64:
		*v = 1 / float64(i+2)
		return *v
	case *time.Duration:
		*v = time.Duration(i+1) * time.Second
		return v.String()
	case *[]string:
		*v = []string{fmt.Sprintf("value-%d", i)}
		return *v
	}
	t.Fatalf("setting %s: no arg of type %T", s.Arg, s.Value)
	return nil
}
