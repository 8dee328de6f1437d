// Command regosched-scheduler is kube-scheduler with regosched built in as
// the framework plugin "Regosched" (enable it in a profile of the
// KubeSchedulerConfiguration; see deploy/plugin/). It takes every
// kube-scheduler flag, and serves regosched's regosched_* metrics on the
// scheduler's own /metrics.
//
// --version prints regosched's build and the Kubernetes release the
// scheduler is built from (release builds stamp k8s.io/component-base's
// version with ldflags; see the Makefile's SCHEDULER_LDFLAGS);
// --version=raw prints kube-scheduler's raw form.
//
// REGOSCHED_CPU_PROFILE=FILE writes a CPU profile of the whole run to FILE
// when the scheduler exits (kube-scheduler's own /debug/pprof needs its
// secure port and authorization; make bench-e2e's --profile-dir uses this).
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/metrics/legacyregistry"
	k8sversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/plumbing/version"
	"github.com/regosched/regosched/scheduler/plugin"
)

func main() {
	stop, err := profile(os.Getenv("REGOSCHED_CPU_PROFILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := cli.Run(newCommand(legacyregistry.Registerer()))
	stop()
	os.Exit(code)
}

// newCommand is kube-scheduler's command with the Regosched plugin
// registered and a --version that names both builds, since kube-scheduler's
// own names only the Kubernetes one.
func newCommand(reg prometheus.Registerer) *cobra.Command {
	factory := plugin.Factory(regosched.DefaultPolicy(), reg)
	cmd := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		// Logged here rather than before the command runs, because only by
		// now has kube-scheduler applied its --logging-format.
		klog.FromContext(ctx).Info("Starting regosched plugin", "regosched", version.Get().String())
		return factory(ctx, args, h)
	}))
	cmd.Use = "regosched-scheduler"
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
			if _, err := fmt.Fprint(c.OutOrStdout(), versionText()); err != nil {
				return fmt.Errorf("print the version: %w", err)
			}
			return nil
		}
		return run(c, args)
	}
	return cmd
}

// versionText is what --version prints: regosched's line, then
// kube-scheduler's own line unchanged, so scripts that read it still work.
func versionText() string {
	return fmt.Sprintf("%s\nKubernetes %s\n", version.Get(), k8sversion.Get())
}

// profile starts a CPU profile to path, if set, and returns what ends it.
func profile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("REGOSCHED_CPU_PROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("REGOSCHED_CPU_PROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
