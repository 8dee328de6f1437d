package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// StartScheduler writes configYAML (a KubeSchedulerConfiguration, which must
// name its kubeconfig; see SchedulerConfig) to Dir and runs kube-scheduler
// with it. The scheduler serves no health or metrics port, so several can
// run side by side; the caller sees it working by watching pods get bound.
func (c *Cluster) StartScheduler(ctx context.Context, configYAML []byte) (*Process, error) {
	return c.StartSchedulerBinary(ctx, c.bins.KubeScheduler, configYAML)
}

// StartSchedulerBinary is StartScheduler with another build of
// kube-scheduler at path, such as regosched-scheduler (kube-scheduler with
// regosched's framework plugin), and env added to its environment; the
// process is named after the file.
func (c *Cluster) StartSchedulerBinary(ctx context.Context, path string, configYAML []byte, env ...string) (*Process, error) {
	name := filepath.Base(path)
	cfg := filepath.Join(c.dir, name+"-config.yaml")
	if err := os.WriteFile(cfg, configYAML, 0o644); err != nil {
		return nil, fmt.Errorf("writing scheduler config: %w", err)
	}
	return c.StartProcessEnv(ctx, name, path, env,
		"--config="+cfg,
		"--secure-port=0",
		"-v=2",
	)
}

// SchedulerConfig adapts the KubeSchedulerConfiguration in base (the text of
// deploy/scheduler/kube-scheduler-config.yaml) to a local cluster: it sets
// clientConnection.kubeconfig, turns leader election off (nothing else
// competes, and acquiring the lease only delays the first binding), and, if
// extenderURL is not empty, points every extender's urlPrefix at it.
//
// It edits the parsed document rather than the text, so comments in base
// are dropped and keys come back sorted.
func SchedulerConfig(base []byte, kubeconfig, extenderURL string) ([]byte, error) {
	if kubeconfig == "" {
		return nil, errors.New("scheduler config: empty kubeconfig path")
	}
	var doc map[string]any
	if err := yaml.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	if kind, _ := doc["kind"].(string); kind != "KubeSchedulerConfiguration" {
		return nil, fmt.Errorf("scheduler config: kind is %q, want KubeSchedulerConfiguration", kind)
	}
	if v, _ := doc["apiVersion"].(string); !strings.HasPrefix(v, "kubescheduler.config.k8s.io/") {
		return nil, fmt.Errorf("scheduler config: unexpected apiVersion %q", v)
	}

	conn, err := child(doc, "clientConnection")
	if err != nil {
		return nil, err
	}
	conn["kubeconfig"] = kubeconfig

	election, err := child(doc, "leaderElection")
	if err != nil {
		return nil, err
	}
	election["leaderElect"] = false

	if extenderURL != "" {
		err := forEachExtender(doc, "extender URL given but", func(ext map[string]any) { ext["urlPrefix"] = extenderURL })
		if err != nil {
			return nil, err
		}
	}

	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return out, nil
}

// child returns the mapping under key in m, adding an empty one if absent.
func child(m map[string]any, key string) (map[string]any, error) {
	switch v := m[key].(type) {
	case map[string]any:
		return v, nil
	case nil:
		c := map[string]any{}
		m[key] = c
		return c, nil
	default:
		return nil, fmt.Errorf("scheduler config: %s is %T, want a mapping", key, v)
	}
}

// EditExtenders applies edit to every extender entry of a
// KubeSchedulerConfiguration (as SchedulerConfig returns it), on the parsed
// document. what names the edit in the error for a configuration without
// extenders.
func EditExtenders(cfg []byte, what string, edit func(ext map[string]any)) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	if err := forEachExtender(doc, what, edit); err != nil {
		return nil, err
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return out, nil
}

func forEachExtender(doc map[string]any, what string, edit func(ext map[string]any)) error {
	extenders, _ := doc["extenders"].([]any)
	if len(extenders) == 0 {
		return fmt.Errorf("scheduler config: %s no extenders configured", what)
	}
	for i, e := range extenders {
		ext, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("scheduler config: extenders[%d] is %T, want a mapping", i, e)
		}
		edit(ext)
	}
	return nil
}
