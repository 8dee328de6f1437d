package deploytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regosched/regosched/test/localcluster"
)

// toolTimeout bounds one test's helm and kustomize runs, including the
// first, cold build of the tools (minutes on a busy 2-core machine).
const toolTimeout = 20 * time.Minute

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := localcluster.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("renders with helm and kustomize (built from the Go module proxy on first use)")
	}
}

// dig returns the mapping at path, creating none: an empty map (not stored)
// when something on the way is missing.
func dig(o map[string]any, path ...string) map[string]any {
	cur := o
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return map[string]any{}
		}
		cur = next
	}
	return cur
}

// renders memoises helm template and kustomize build within the test binary.
var renders sync.Map

func memo(t *testing.T, key string, f func(context.Context) ([]byte, error)) []Object {
	t.Helper()
	if v, ok := renders.Load(key); ok {
		return clone(t, v.([]byte))
	}
	ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
	defer cancel()
	out, err := f(ctx)
	if err != nil {
		t.Fatal(err)
	}
	renders.Store(key, out)
	return clone(t, out)
}

func clone(t *testing.T, stream []byte) []Object {
	t.Helper()
	objs, err := Objects(stream)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func kustomizeObjects(t *testing.T, root, dir string) []Object {
	t.Helper()
	return memo(t, "kustomize "+dir, func(ctx context.Context) ([]byte, error) { return Kustomize(ctx, root, dir) })
}

func chartObjects(t *testing.T, root string, r Render) []Object {
	t.Helper()
	key, _ := json.Marshal(r)
	return memo(t, "helm "+string(key), func(ctx context.Context) ([]byte, error) { return r.Template(ctx, root) })
}

func lint(t *testing.T, root string, r Render) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), toolTimeout)
	defer cancel()
	out, err := r.Lint(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "0 chart(s) failed") {
		t.Fatalf("helm lint:\n%s", out)
	}
}

func fileObjects(t *testing.T, root, rel string) []Object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return clone(t, b)
}

// schedulerConfig returns the KubeSchedulerConfiguration text of the
// chart's scheduler ConfigMap.
func schedulerConfig(t *testing.T, objs []Object) []byte {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "ConfigMap" && dig(o, "metadata")["name"] == "regosched-scheduler-config" {
			s, _ := dig(o, "data")["kube-scheduler-config.yaml"].(string)
			return []byte(s)
		}
	}
	t.Fatal("no ConfigMap regosched-scheduler-config")
	return nil
}

// container returns the first container of a Deployment.
func container(t *testing.T, objs []Object, name string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "Deployment" && dig(o, "metadata")["name"] == name {
			return dig(o, "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

func volumes(t *testing.T, objs []Object, deployment string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "Deployment" && dig(o, "metadata")["name"] == deployment {
			out := map[string]any{}
			vs, _ := dig(o, "spec", "template", "spec")["volumes"].([]any)
			for _, v := range vs {
				m := v.(map[string]any)
				out[m["name"].(string)] = m
			}
			return out
		}
	}
	t.Fatalf("no Deployment %s", deployment)
	return nil
}

func find(objs []Object, key string) Object {
	for _, o := range objs {
		if Key(o) == key {
			return o
		}
	}
	return nil
}

// names gives a render's namespace as Template defaults it, and the chart's
// fullname for its release (the release itself when it is "regosched", else
// RELEASE-regosched).
func names(r Render) (ns, fullname string) {
	release, ns := r.Release, r.Namespace
	if release == "" {
		release, ns = "regosched", "regosched-system"
	}
	fullname = "regosched"
	if release != "regosched" {
		fullname = release + "-regosched"
	}
	return ns, fullname
}
