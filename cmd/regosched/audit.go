package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/audit"
	"github.com/regosched/regosched/internal/bundles"
	"github.com/regosched/regosched/internal/kubeclient"
	"github.com/regosched/regosched/internal/output"
	"github.com/regosched/regosched/internal/repair"
)

// errViolations is runAudit's answer when a placement breaks a hard rule:
// main exits 1 on it, without an error line, so that scripts tell that
// apart from a failure to audit (exit 2).
var errViolations = errors.New("placements break hard rules")

// runAudit wires `regosched audit`.
func runAudit(args []string) error {
	violations, err := auditTo(args, os.Stdout, os.Stderr)
	if err != nil {
		return err
	}
	if violations {
		return errViolations
	}
	return nil
}

// auditTo parses flags, audits once and writes the report to stdout; it
// reports whether any violation was found.
func auditTo(args []string, stdout, stderr io.Writer) (violations bool, err error) {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)")
	policyPath := fs.String("policy", "", "OPA bundle directory or .tar.gz (default: the embedded policy of rego/)")
	policyData := fs.String("policy-data", "", "JSON object merged into the policy's data.regosched.config, as serve's --policy-data")
	outputFlag := fs.String("o", "table", "output format: table or json")
	timeout := fs.Duration("timeout", audit.DefaultSyncTimeout, "how long to wait for the API server and the initial lists of pods and nodes")
	plan := fs.Bool("plan", false, "also print, for each violation, the repair `serve --repair=on` would make and why it is safe, or why none is (Redis is not asked from here: the checks it makes before acting are named)")
	level := fs.String("log-level", "warn", "log level of the placement cache and the audit (to standard error)")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("audit takes no arguments, got %q", fs.Args())
	}
	format, err := output.ParseFormat(*outputFlag)
	if err != nil {
		return false, fmt.Errorf("-o: %w", err)
	}
	logger := logrus.New()
	logger.SetOutput(stderr)
	lvl, err := logrus.ParseLevel(*level)
	if err != nil {
		return false, fmt.Errorf("--log-level: %w", err)
	}
	logger.SetLevel(lvl)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pol, _, err := bundles.Options{DataFile: *policyData}.LoadLocal(ctx, *policyPath, regosched.DefaultPolicy())
	if err != nil {
		return false, err
	}
	client, err := kubeclient.New(*kubeconfig)
	if err != nil {
		return false, err
	}
	var steps []repair.Step
	opts := audit.OnceOptions{Client: client, Policy: pol, SyncTimeout: *timeout, Log: logger}
	if *plan {
		opts.AfterPass = func(ctx context.Context, cache audit.Placements, r audit.Report) error {
			steps = repair.Steps(ctx, pol, cache, client, nil, repair.DefaultMaxLagBytes, r)
			return nil
		}
	}
	report, err := audit.Once(ctx, opts)
	if err != nil {
		return false, err
	}
	if *plan {
		err = repair.Render(stdout, report, steps, format)
	} else {
		err = audit.Render(stdout, report, format)
	}
	if err != nil {
		return false, err
	}
	if len(report.Violations) == 0 && len(report.Skipped) > 0 {
		return false, fmt.Errorf("the policy failed to judge %d pods; see the log above", len(report.Skipped))
	}
	return len(report.Violations) > 0, nil
}
