// Command regosched-scheduler is kube-scheduler with regosched built in as
// the framework plugin "Regosched" (enable it in a profile of the
// KubeSchedulerConfiguration; see deploy/plugin/). It takes every
// kube-scheduler flag.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/scheduler/plugin"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.Factory(regosched.DefaultPolicy())))
	os.Exit(cli.Run(cmd))
}
