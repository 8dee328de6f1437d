// Command regosched-demo runs regosched end to end on this machine, with no
// cluster and no container runtime: a local control plane, the extender and
// kube-scheduler on loopback, a sample workload placed one pod at a time,
// and a table of where every pod went. Then, if redis-server and redis-cli
// are installed, a real Redis Cluster is failed over so that two masters
// share a node, and regosched's repair (--repair=on) undoes it with every
// key intact; without them the output says the scene was skipped. Progress
// goes to stderr, the tables to stdout. See test/demo.
//
//	go run ./test/cmd/regosched-demo --nodes 6
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/test/demo"
)

func main() {
	nodes := flag.Int("nodes", 6, "number of fake nodes (zones a, b, c round robin); the failover scene needs 5")
	level := flag.String("log-level", "info", "progress detail on stderr: debug, info, warn, error")
	flag.Parse()

	log := logrus.New()
	log.SetOutput(os.Stderr)
	lvl, err := logrus.ParseLevel(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "regosched-demo: --log-level:", err)
		os.Exit(2)
	}
	log.SetLevel(lvl)

	// Ctrl-C cancels the run; Run then stops everything it started.
	if err := run(*nodes, log); err != nil {
		fmt.Fprintln(os.Stderr, "regosched-demo:", err)
		os.Exit(1)
	}
}

// run holds the signal context, so that it is released before main exits.
func run(nodes int, log *logrus.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, demo.Options{Nodes: nodes, Out: os.Stdout, Log: log}); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		return err
	}
	return nil
}
