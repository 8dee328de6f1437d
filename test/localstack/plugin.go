package localstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/regosched/regosched/test/localcluster"
)

// PluginSchedulerConfigPath is regosched-scheduler's deployed
// configuration, relative to the repository root.
const PluginSchedulerConfigPath = "deploy/plugin/kube-scheduler-config.yaml"

// BuildPluginScheduler builds regosched-scheduler (kube-scheduler with
// regosched's framework plugin, the Go module in scheduler/) from the
// checkout at root into out. The first build compiles kube-scheduler and
// takes minutes; later ones reuse the Go build cache.
func BuildPluginScheduler(ctx context.Context, root, out string) error {
	return goBuild(ctx, filepath.Join(root, "scheduler"), out, "./cmd/regosched-scheduler")
}

// PluginSchedulerConfig is the deployed regosched-scheduler configuration
// of the checkout at root, adapted to the local cluster of kubeconfig.
func PluginSchedulerConfig(root, kubeconfig string) ([]byte, error) {
	base, err := os.ReadFile(filepath.Join(root, PluginSchedulerConfigPath))
	if err != nil {
		return nil, fmt.Errorf("reading regosched-scheduler config: %w", err)
	}
	return localcluster.SchedulerConfig(base, kubeconfig, "")
}
