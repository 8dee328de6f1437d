package deploytest

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/frontend/settings/settingstest"
)

// TestPluginArgsAreSettings: the mirror's args are the settings' and the
// plugin's own two, so that a setting renamed in internal/frontend/settings
// fails here too, without the scheduler module (whose
// TestArgsAreSettings holds the mirror to the plugin's Args).
func TestPluginArgsAreSettings(t *testing.T) {
	own := []string{"logLevel", "syncTimeout"}
	got := slices.DeleteFunc(slices.Sorted(maps.Keys(settingstest.Fields(PluginArgs{}))), func(name string) bool {
		return slices.Contains(own, name)
	})
	if diff := cmp.Diff(settingstest.ArgNames(), got); diff != "" {
		t.Errorf("plugin args (-settings +mirror):\n%s", diff)
	}
}
