// Package settingstest reads the settings' names as the plugin's args
// and the args a struct declares, for the tests that hold the plugin's
// Args and their mirrors to internal/frontend/settings.
package settingstest

import (
	"reflect"
	"slices"
	"strings"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/frontend/settings"
	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// DecisionLogArg is the plugin arg that holds the decision log's settings.
const DecisionLogArg = "decisionLog"

// ArgNames are the plugin's args of every setting, sorted: the policy's,
// the shadow policy's and, under DecisionLogArg, the decision log's.
func ArgNames() []string {
	var names []string
	var path string
	for _, s := range append(settings.Policy(&bundles.Config{}), settings.ShadowPolicy(&path)) {
		names = append(names, s.Arg)
	}
	for _, s := range settings.DecisionLog(&decisionlog.Settings{}) {
		names = append(names, DecisionLogArg+"."+s.Arg)
	}
	slices.Sort(names)
	return names
}

// Fields are the JSON names of the fields of v, a struct, each with its
// Go type; a field that points at a struct is listed by its own fields,
// as "name.field", the way ArgNames names the decision log's.
func Fields(v any) map[string]string {
	fields := map[string]string{}
	addFields(fields, "", reflect.TypeOf(v))
	return fields
}

func addFields(fields map[string]string, prefix string, t reflect.Type) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = f.Name
		}
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			addFields(fields, prefix+name+".", f.Type.Elem())
			continue
		}
		fields[prefix+name] = f.Type.String()
	}
}
