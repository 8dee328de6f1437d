// Command regosched-scheduler is kube-scheduler with regosched built in as
// the framework plugin "Regosched" (enable it in a profile of the
// KubeSchedulerConfiguration; see deploy/plugin/). It takes every
// kube-scheduler flag, and serves regosched's regosched_* metrics on the
// scheduler's own /metrics.
//
// REGOSCHED_CPU_PROFILE=FILE writes a CPU profile of the whole run to FILE
// when the scheduler exits (kube-scheduler's own /debug/pprof needs its
// secure port and authorization; make bench-e2e's --profile-dir uses this).
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/scheduler/plugin"
)

func main() {
	stop, err := profile(os.Getenv("REGOSCHED_CPU_PROFILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.Factory(regosched.DefaultPolicy(), legacyregistry.Registerer())))
	code := cli.Run(cmd)
	stop()
	os.Exit(code)
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
